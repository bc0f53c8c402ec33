"""Probability of improvement and the interquartile mean (drmas/report/stats.py) against slow,
direct computations: plain loops over seeds and problems, and the bootstrap resamples built
as arrays from the same draws."""

import numpy as np
import pandas as pd
import pytest

from conftest import make_config, math_suite
from drmas.report.stats import iqm_bootstrap, probability_of_improvement, trim_mean
from drmas.report.tables import write_table
from runs import scores_file


def slow_poi(x, y) -> float:
    total = 0.0
    for s in range(x.shape[0]):
        for p in range(x.shape[1]):
            total += 1.0 if x[s, p] > y[s, p] else 0.5 if x[s, p] == y[s, p] else 0.0
    return 100.0 * total / x.size


def slow_trim_mean(values) -> float:
    v = sorted(float(a) for a in values)
    k = int(0.25 * len(v))
    kept = v[k:len(v) - k]
    return sum(kept) / len(kept)


def slow_iqm_replicates(strata, n_boot, seed=0):
    """Each replicate's resample built as an array (seeds and problems repeated by their
    multinomial counts), then its trimmed mean: the draws in the order iqm_bootstrap uses."""
    rng = np.random.default_rng(seed)
    n_seeds = strata[0].shape[0]
    w_seed = rng.multinomial(n_seeds, np.full(n_seeds, 1.0 / n_seeds), size=n_boot)
    w_probs = [rng.multinomial(s.shape[1], np.full(s.shape[1], 1.0 / s.shape[1]), size=n_boot)
               for s in strata]
    reps = []
    for b in range(n_boot):
        seeds = np.repeat(np.arange(n_seeds), w_seed[b])
        pooled = []
        for s, w in zip(strata, w_probs):
            probs = np.repeat(np.arange(s.shape[1]), w[b])
            pooled += [s[i, j] for i in seeds for j in probs]
        reps.append(slow_trim_mean(pooled))
    return np.array(reps)


def test_probability_of_improvement_against_loops():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 5, size=(3, 7)).astype(float)
    y = rng.integers(0, 5, size=(3, 7)).astype(float)
    iv = probability_of_improvement(x, y, n_boot=300)
    assert iv.mean == pytest.approx(slow_poi(x, y))
    assert iv.lo <= iv.mean <= iv.hi and iv.seeds == 3 and iv.problems == 7
    # strata: the mean of the per-source probabilities
    x2, y2 = rng.random((3, 4)), rng.random((3, 4))
    both = probability_of_improvement([x, x2], [y, y2], n_boot=300)
    assert both.mean == pytest.approx((slow_poi(x, y) + slow_poi(x2, y2)) / 2)
    assert probability_of_improvement(x, x, n_boot=50).mean == 50.0
    with pytest.raises(ValueError):
        probability_of_improvement(x, x2)


@pytest.mark.parametrize("shapes", [[(3, 8)], [(2, 5), (2, 3)], [(1, 9)]])
def test_iqm_and_its_interval_against_resamples_built_as_arrays(shapes):
    rng = np.random.default_rng(7)
    strata = [rng.integers(0, 17, size=s).astype(float) * 100 / 16 for s in shapes]  # ties
    n_boot = 200
    iv = iqm_bootstrap(strata if len(strata) > 1 else strata[0], n_boot=n_boot)
    pooled = np.concatenate([s.ravel() for s in strata])
    assert iv.mean == pytest.approx(slow_trim_mean(pooled))
    assert trim_mean(pooled) == pytest.approx(slow_trim_mean(pooled))
    reps = slow_iqm_replicates(strata, n_boot)
    lo, hi = np.quantile(reps, [0.025, 0.975])
    assert (iv.lo, iv.hi) == (pytest.approx(lo), pytest.approx(hi))


def test_stats_table_written_beside_the_main_table(tmp_path):
    cfg = make_config(tmp_path)
    files = [scores_file(tmp_path, "nonshared", "drmas", 0, {"a": [8, 16, 0], "b": [4, 4, 4]}),
             scores_file(tmp_path, "nonshared", "drmas", 1, {"a": [16, 16, 0], "b": [4, 8, 0]}),
             scores_file(tmp_path, "nonshared", "grpo", 0, {"a": [8, 8, 0], "b": [4, 4, 4]}),
             scores_file(tmp_path, "nonshared", "grpo", 1, {"a": [8, 16, 0], "b": [0, 4, 0]}),
             scores_file(tmp_path, "nonshared", "base", 0, {"a": [2, 2, 2], "b": [0, 0, 0]})]
    out = tmp_path / "tables" / "math"
    write_table(cfg, math_suite(), files, str(out), n_boot=200)
    csv = pd.read_csv(tmp_path / "tables" / "math_stats.csv")
    assert list(csv.columns[:3]) == ["assignment", "method", "statistic"]
    assert list(csv.statistic) == ["IQM", "IQM", "IQM", "P(> grpo)"]
    poi = csv[csv.statistic == "P(> grpo)"].iloc[0]
    # a: drmas beats grpo on (seed 0, p1) and (seed 1, p0), ties elsewhere: (2 + 4 / 2) / 6
    assert poi["a avg@16"] == pytest.approx(round(100 * 4 / 6, 2))
    assert "P(> grpo)" in (tmp_path / "tables" / "math_stats.md").read_text()
