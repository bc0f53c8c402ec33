"""Confidence intervals over seeds and problems: a seeded, crossed percentile bootstrap.

A table cell (say avg@16 on one data_source) is the mean of a seeds x problems matrix X: the
same test problems are evaluated after every seed's run. Its sampling error has two sources,
the seeds (another RL run would land elsewhere) and the problems (another draw of test
problems would score differently), so each bootstrap replicate resamples both: S seeds with
replacement and, independently, P problems with replacement, and takes the mean of X over
the crossed selection (the "two-way" bootstrap for crossed designs). A cell over several
data_sources (the "Avg" column) resamples problems within each source (strata) and seeds
once for all of them, then averages the per-source means, as the table does.

A paired difference (Dr. MAS - GRPO) is the same bootstrap on D = X_drmas - X_grpo, paired by
seed and problem: what is shared by a seed's two runs or by a problem's difficulty cancels.

With one seed the interval covers problems only; with one problem per source (scores without
per-problem counts) it covers seeds only. Intervals are percentile intervals from
`N_BOOT` replicates drawn from `numpy.random.default_rng(seed)`: the same inputs give the
same interval on every machine.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

N_BOOT = 2000
LEVEL = 0.95


@dataclass(frozen=True)
class Interval:
    mean: float
    lo: float
    hi: float
    seeds: int
    problems: int

    def cell(self, digits: int = 1, signed: bool = False) -> str:
        """'62.3 [55.1, 69.0]' (signed: '+4.2 [-1.0, 9.5]'); the point alone without spread."""
        f = f"{{:+.{digits}f}}" if signed else f"{{:.{digits}f}}"
        if self.lo == self.hi == self.mean:
            return f.format(self.mean)
        return f"{f.format(self.mean)} [{self.lo:.{digits}f}, {self.hi:.{digits}f}]"


def _as_strata(x) -> list[np.ndarray]:
    strata = [np.asarray(x, dtype=np.float64)] if isinstance(x, np.ndarray) else \
        [np.asarray(s, dtype=np.float64) for s in x]
    if not strata:
        raise ValueError("bootstrap needs at least one seeds x problems matrix")
    seeds = strata[0].shape[0]
    for s in strata:
        if s.ndim != 2 or s.shape[0] != seeds or s.shape[1] == 0 or seeds == 0:
            raise ValueError(f"every stratum must be a non-empty (seeds={seeds}, problems) "
                             f"matrix, got shape {s.shape}")
        if np.isnan(s).any():
            raise ValueError("bootstrap input holds NaN (a seed misses a problem?)")
    return strata


def crossed_bootstrap(x, *, n_boot: int = N_BOOT, level: float = LEVEL, seed: int = 0) -> Interval:
    """Mean and percentile interval of X (seeds x problems), or of the mean over strata of
    such matrices (one per data_source, all with the same seeds), resampling seeds and
    problems independently.

    Vectorised: replicate b's mean over a resample is w_s . X . w_p / (S P), with w_s and
    w_p the multinomial counts of how often each seed and problem was drawn.
    """
    strata = _as_strata(x)
    rng = np.random.default_rng(seed)
    n_seeds = strata[0].shape[0]
    w_seed = rng.multinomial(n_seeds, np.full(n_seeds, 1.0 / n_seeds), size=n_boot)
    reps = np.zeros(n_boot)
    for s in strata:
        p = s.shape[1]
        w_prob = rng.multinomial(p, np.full(p, 1.0 / p), size=n_boot)
        reps += np.einsum("bs,sp,bp->b", w_seed, s, w_prob) / (n_seeds * p)
    reps /= len(strata)
    mean = float(np.mean([s.mean() for s in strata]))
    alpha = (1.0 - level) / 2
    lo, hi = np.quantile(reps, [alpha, 1.0 - alpha])
    if n_seeds == 1 and all(s.shape[1] == 1 for s in strata):
        lo = hi = mean                      # nothing to resample: a point, not an interval
    return Interval(mean, float(lo), float(hi), n_seeds, sum(s.shape[1] for s in strata))


def paired_bootstrap(a, b, **kw) -> Interval:
    """Interval of mean(a - b) for matrices (or strata of matrices) paired by seed and
    problem: `crossed_bootstrap` on the differences."""
    sa, sb = _as_strata(a), _as_strata(b)
    if [s.shape for s in sa] != [s.shape for s in sb]:
        raise ValueError(f"paired bootstrap needs equal shapes, got {[s.shape for s in sa]} "
                         f"and {[s.shape for s in sb]}")
    return crossed_bootstrap([x - y for x, y in zip(sa, sb)], **kw)


def seed_bootstrap(values, **kw) -> Interval:
    """Interval of the mean of one number per seed (e.g. a run's spike count)."""
    v = np.asarray(values, dtype=np.float64).reshape(-1, 1)
    return crossed_bootstrap(v, **kw)
