"""pass@k / avg@k against brute force and a hand-counted table."""

import itertools

import pandas as pd
import pytest

from drmas.errors import DataError
from drmas.evaluation.metrics import aggregate, avg_at_k, pass_at_k, problem_values


def brute_pass_at_k(n, c, k):
    """Share of all k-subsets of n samples (the first c successes) holding a success."""
    outcomes = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(outcomes, k))
    return sum(any(s) for s in subsets) / len(subsets)


def test_pass_at_k_equals_brute_force():
    for n in range(1, 9):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(brute_pass_at_k(n, c, k), abs=1e-12)


def test_pass_at_n_is_any_success_and_large_n_is_stable():
    for n in (1, 16, 64):
        assert pass_at_k(n, 0, n) == 0.0
        for c in (1, n):
            assert pass_at_k(n, c, n) == 1.0
    assert pass_at_k(1, 1, 1) == 1.0
    # k = 1 is the plain success rate; huge n does not overflow
    assert pass_at_k(10_000, 2_500, 1) == pytest.approx(0.25)
    assert 0.0 < pass_at_k(100_000, 1, 16) < 1.0


@pytest.mark.parametrize("args", [(0, 0, 1), (4, 5, 1), (4, -1, 1), (4, 1, 0), (4, 1, 5),
                                  (4.0, 1, 1), (4, True, 1)])
def test_pass_at_k_rejects_bad_arguments(args):
    with pytest.raises(ValueError):
        pass_at_k(*args)


def test_avg_at_k():
    assert avg_at_k([1, 0, 0, 1]) == 0.5
    assert avg_at_k([0.9, -0.1, 1.0, 0.0]) == 0.5  # success = score >= 0.5
    assert avg_at_k([True, True]) == 1.0
    with pytest.raises(ValueError):
        avg_at_k([])


def tiny_samples():
    # source "a": p1 has 1 success in 4, p2 none; source "b": p3 all 4 succeed.
    # Scores carry the -0.1 format penalty sometimes: 0.9 is a success, -0.1 is not.
    rows = [("a", "p1", s) for s in (0.9, 0.0, -0.1, 0.0)]
    rows += [("a", "p2", s) for s in (0.0, 0.0, 0.0, -0.1)]
    rows += [("b", "p3", s) for s in (1.0, 1.0, 0.9, 1.0)]
    return pd.DataFrame(rows, columns=["data_source", "problem_id", "score"])


def test_aggregate_tiny_table_k4():
    out = aggregate(tiny_samples(), k=4)
    # per problem avg@4: p1 0.25, p2 0, p3 1; pass@4: 1, 0, 1
    assert out["per_source"]["a"] == {"avg@4": 0.125, "pass@4": 0.5, "n_problems": 2}
    assert out["per_source"]["b"] == {"avg@4": 1.0, "pass@4": 1.0, "n_problems": 1}
    # overall weights each problem once: (0.25 + 0 + 1) / 3, (1 + 0 + 1) / 3
    assert out["overall"]["avg@4"] == pytest.approx(1.25 / 3)
    assert out["overall"]["pass@4"] == pytest.approx(2 / 3)
    assert out["overall"]["n_problems"] == 3
    # macro = mean of the two sources: (0.125 + 1) / 2, (0.5 + 1) / 2
    assert out["macro"] == {"avg@4": 0.5625, "pass@4": 0.75, "n_sources": 2}
    # per problem [n, c], and back to the per-problem numbers whose means the sources hold
    assert out["per_problem"] == {"a": {"p1": [4, 1], "p2": [4, 0]}, "b": {"p3": [4, 4]}}
    values = problem_values(out["per_problem"]["a"], 4)
    assert values == {"avg@4": {"p1": 0.25, "p2": 0.0}, "pass@4": {"p1": 1.0, "p2": 0.0}}
    assert problem_values(out["per_problem"]["a"], 2)["pass@2"]["p1"] == pytest.approx(0.5)


def test_aggregate_k_below_n_and_success_column():
    samples = tiny_samples()
    out = aggregate(samples, k=2)
    # p1: n = 4, c = 1 -> 1 - C(3,2)/C(4,2) = 1 - 3/6 = 0.5
    assert out["per_source"]["a"]["pass@2"] == pytest.approx((0.5 + 0.0) / 2)
    flipped = samples.assign(success=samples["score"] < 0.5)  # the column wins over score
    assert aggregate(flipped, k=4)["per_source"]["b"]["avg@4"] == 0.0


def test_aggregate_rejects_bad_tables():
    with pytest.raises(DataError, match="problem_id"):
        aggregate(pd.DataFrame({"data_source": ["a"], "score": [1.0]}), k=1)
    with pytest.raises(DataError, match="fewer than k=8"):
        aggregate(tiny_samples(), k=8)
    with pytest.raises(DataError, match="empty"):
        aggregate(tiny_samples().iloc[:0], k=1)
