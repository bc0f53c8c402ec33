"""Bootstrap intervals over seeds and problems: against known distributions, and their
coverage in simulation."""

import math

import numpy as np
import pytest

from drmas.report.intervals import (Interval, crossed_bootstrap, paired_bootstrap,
                                    seed_bootstrap)


def test_mean_and_bernoulli_width_match_the_normal_approximation():
    # one seed, 400 problems solved with probability 0.3: the interval is about
    # p +- 1.96 sqrt(p (1 - p) / n) (n large: bootstrap and normal theory agree)
    rng = np.random.default_rng(0)
    x = (rng.random((1, 400)) < 0.3).astype(float)
    iv = crossed_bootstrap(x, n_boot=4000, seed=1)
    p = x.mean()
    half = 1.96 * math.sqrt(p * (1 - p) / 400)
    assert iv.mean == pytest.approx(p)
    assert (iv.hi - iv.lo) / 2 == pytest.approx(half, rel=0.1)
    assert iv.lo < p < iv.hi and (iv.seeds, iv.problems) == (1, 400)


def test_seeds_only_width_matches_the_bootstrap_theory():
    # 30 seeds from N(0, 1): the percentile interval's half width is about
    # 1.96 * s * sqrt((n - 1) / n) / sqrt(n) (the bootstrap's plug-in standard error)
    rng = np.random.default_rng(3)
    v = rng.normal(0.0, 1.0, 30)
    iv = seed_bootstrap(v, n_boot=4000, seed=0)
    se = v.std(ddof=0) / math.sqrt(30)
    assert (iv.hi - iv.lo) / 2 == pytest.approx(1.96 * se, rel=0.1)


def test_seeded_and_degenerate_cases():
    x = np.arange(12.0).reshape(3, 4)
    assert crossed_bootstrap(x, seed=5) == crossed_bootstrap(x, seed=5)
    assert crossed_bootstrap(x, seed=5) != crossed_bootstrap(x, seed=6)
    point = crossed_bootstrap(np.array([[0.7]]))
    assert (point.mean, point.lo, point.hi) == (0.7, 0.7, 0.7) and point.cell() == "0.7"
    const = crossed_bootstrap(np.full((3, 5), 2.0))
    assert const.lo == const.hi == 2.0
    assert Interval(4.25, -1.0, 9.5, 2, 3).cell(signed=True) == "+4.2 [-1.0, 9.5]"
    with pytest.raises(ValueError, match="NaN"):
        crossed_bootstrap(np.array([[1.0, np.nan]]))
    with pytest.raises(ValueError, match="equal shapes"):
        paired_bootstrap(np.zeros((2, 3)), np.zeros((2, 4)))


def test_strata_average_sources_like_the_table():
    a = np.array([[1.0, 0.0], [1.0, 1.0]])          # source a: 2 seeds x 2 problems
    b = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 1.0]])  # source b: 2 seeds x 3 problems
    iv = crossed_bootstrap([a, b], n_boot=500)
    assert iv.mean == pytest.approx((a.mean() + b.mean()) / 2) and iv.problems == 5


def test_paired_difference_cancels_shared_variation():
    # big per-problem and per-seed effects shared by both methods, a constant gain of 0.1:
    # the paired interval is tight around 0.1, the unpaired one would be wide
    rng = np.random.default_rng(2)
    base = rng.normal(0, 1, (4, 1)) + rng.normal(0, 3, (1, 50))
    drmas = base + 0.1 + rng.normal(0, 0.01, (4, 50))
    iv = paired_bootstrap(drmas, base, n_boot=2000)
    assert iv.lo > 0.09 and iv.hi < 0.11
    wide = crossed_bootstrap(drmas, n_boot=2000)
    assert wide.hi - wide.lo > 10 * (iv.hi - iv.lo)


@pytest.mark.parametrize("seeds,problems,sd_seed,sd_problem,sd_noise", [
    (5, 40, 0.05, 0.2, 0.1),        # a few seeds, problems differ most (as in the tables)
    (1, 40, 0.0, 0.2, 0.1),         # one seed: problems only
])
def test_coverage_close_to_95_percent(seeds, problems, sd_seed, sd_problem, sd_noise):
    """Crossed random effects x = mu + seed + problem + noise: the interval covers mu in
    about 95% of 400 simulated tables (binomial sd of the rate: 1.1 points)."""
    rng = np.random.default_rng(11)
    mu, hits = 0.5, 0
    reps = 400
    for r in range(reps):
        x = (mu + rng.normal(0, sd_seed, (seeds, 1)) + rng.normal(0, sd_problem, (1, problems))
             + rng.normal(0, sd_noise, (seeds, problems)))
        iv = crossed_bootstrap(x, n_boot=1000, seed=r)
        hits += iv.lo <= mu <= iv.hi
    assert 0.90 <= hits / reps <= 0.985
