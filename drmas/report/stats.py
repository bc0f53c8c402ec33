"""Two statistics researchers expect beside the mean's interval (rliable, Agarwal et al. 2021):
the probability of improvement of a method over GRPO and the interquartile mean.

- **Probability of improvement** P(X_m > X_grpo): per (seed, problem) pair of the two rows'
  seeds x problems matrices, 1 when the method scores higher, 1/2 on a tie, 0 below; the
  mean over the pairs. Paired by seed and problem (what a seed or a problem shares cancels),
  as the Δ row of the main table. Its interval is the crossed bootstrap of that 0 / 1/2 / 1
  matrix (`intervals.crossed_bootstrap`: seeds and problems resampled independently); 50
  means "no better, no worse".
- **Interquartile mean (IQM)**: the mean of the middle half of a row's seed x problem values,
  pooled (scipy's `trim_mean(x, 0.25)`: int(N/4) values cut at each end). The "Avg" column
  pools every source's problems. Its interval resamples seeds and problems as the crossed
  bootstrap does (problems within their source), the IQM of each resample computed from the
  multinomial counts without building the resampled array (`_weighted_iqm`).

Both in %, per source and metric, written to `tables/<suite>_stats.{csv,md}` and into the
result card (drmas/report/card.py). Tested against plain loops (tests/report/test_stats.py).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from drmas.report.cells import AVG, interval_cells, matrices, metrics_of, sources_of
from drmas.report.intervals import LEVEL, N_BOOT, Interval, crossed_bootstrap

TRIM = 0.25


def improvement_matrix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """1 where x > y, 1/2 where equal, 0 below (elementwise), as float64."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    return (x > y) + 0.5 * (x == y)


def probability_of_improvement(x, y, *, n_boot: int = N_BOOT, seed: int = 0) -> Interval:
    """P(X > Y) in % for seeds x problems matrices paired by seed and problem (or strata of
    such matrices, one per source), with its crossed bootstrap interval."""
    xs = [x] if isinstance(x, np.ndarray) else list(x)
    ys = [y] if isinstance(y, np.ndarray) else list(y)
    if [np.shape(a) for a in xs] != [np.shape(b) for b in ys]:
        raise ValueError("probability of improvement needs matrices of equal shapes")
    iv = crossed_bootstrap([100.0 * improvement_matrix(a, b) for a, b in zip(xs, ys)],
                           n_boot=n_boot, seed=seed)
    return iv


def trim_mean(values, trim: float = TRIM) -> float:
    """scipy.stats.trim_mean: int(trim * N) values cut at each end of the sorted values."""
    v = np.sort(np.asarray(values, dtype=np.float64).ravel())
    k = int(trim * v.size)
    return float(v[k:v.size - k].mean())


def _weighted_iqm(values: np.ndarray, weights: np.ndarray, trim: float = TRIM) -> np.ndarray:
    """The trimmed mean of each replicate's multiset: `values` (N,) sorted, `weights` (B, N)
    integer counts, each row summing to the same total M; int(trim M) cut at each end."""
    total = int(weights[0].sum())
    k = int(trim * total)
    hi_cut = total - k
    cum = np.cumsum(weights, axis=1)
    prev = cum - weights
    kept = np.clip(np.minimum(cum, hi_cut) - np.maximum(prev, k), 0, None)
    return (kept * values).sum(axis=1) / (total - 2 * k)


def iqm_bootstrap(x, *, n_boot: int = N_BOOT, level: float = LEVEL, seed: int = 0) -> Interval:
    """IQM of the values of X (seeds x problems), or of the pooled values of several such
    matrices (strata, one per source, all with the same seeds), with a percentile interval
    from resampling seeds and (within each stratum) problems, in the draw order of
    `intervals.crossed_bootstrap`."""
    strata = [np.asarray(x, dtype=np.float64)] if isinstance(x, np.ndarray) else \
        [np.asarray(s, dtype=np.float64) for s in x]
    n_seeds = strata[0].shape[0]
    rng = np.random.default_rng(seed)
    w_seed = rng.multinomial(n_seeds, np.full(n_seeds, 1.0 / n_seeds), size=n_boot)
    values, weights = [], []
    for s in strata:
        p = s.shape[1]
        w_prob = rng.multinomial(p, np.full(p, 1.0 / p), size=n_boot)
        values.append(s.ravel())
        weights.append(np.einsum("bs,bp->bsp", w_seed, w_prob).reshape(n_boot, -1))
    values, weights = np.concatenate(values), np.concatenate(weights, axis=1)
    order = np.argsort(values, kind="stable")
    reps = _weighted_iqm(values[order], weights[:, order])
    point = trim_mean(values)
    alpha = (1.0 - level) / 2
    lo, hi = np.quantile(reps, [alpha, 1.0 - alpha])
    if n_seeds == 1 and all(s.shape[1] == 1 for s in strata):
        lo = hi = point
    return Interval(point, float(lo), float(hi), n_seeds, sum(s.shape[1] for s in strata))


def stats_table(long: pd.DataFrame, assignments: list[str], n_boot: int = N_BOOT,
                baseline: str = "grpo") -> pd.DataFrame | None:
    """Rows (assignment, method, statistic): "IQM" for every row of the main table, and
    "P(> GRPO)" for every trained method beside GRPO in the same assignment (paired by the
    seeds and problems both have); columns (source or Avg, metric) holding `Interval`s (%).
    None when there are no scores."""
    from drmas.report.style import row_order

    if long.empty:
        return None
    sources, metrics = sources_of(long), metrics_of(long)
    order = row_order({(a, m) for a, m in zip(long.assignment, long.method)}, assignments)
    rows, index = [], []
    for assignment, method in order:
        frame = long[(long.assignment == assignment) & (long.method == method)]
        rows.append(interval_cells(frame, sources, metrics, n_boot, statistic=iqm_bootstrap))
        index.append((assignment, method, "IQM"))
        if method in ("base", baseline) or (assignment, baseline) not in order:
            continue
        base = long[(long.assignment == assignment) & (long.method == baseline)]
        seeds = sorted(set(frame.seed) & set(base.seed))
        if not seeds:
            continue
        cells = {}
        for metric in metrics:
            fa, fb = frame[frame.metric == metric], base[base.metric == metric]
            problems = {s: sorted(set(fa[fa.source == s].problem) & set(fb[fb.source == s].problem))
                        for s in sources}
            ma, mb = matrices(fa, sources, seeds, problems), matrices(fb, sources, seeds, problems)
            for source, x, y in zip(sources, ma, mb):
                cells[(source, metric)] = probability_of_improvement(x, y, n_boot=n_boot)
            cells[(AVG, metric)] = probability_of_improvement(ma, mb, n_boot=n_boot)
        rows.append(cells)
        index.append((assignment, method, f"P(> {baseline})"))
    columns = [(s, m) for s in sources + [AVG] for m in metrics]
    return pd.DataFrame([[row.get(c) for c in columns] for row in rows],
                        index=pd.MultiIndex.from_tuples(index, names=["assignment", "method",
                                                                      "statistic"]),
                        columns=pd.MultiIndex.from_tuples(columns))


def note(n_boot: int) -> str:
    return ("IQM: mean of the middle half of the seed x problem values (25% cut at each end); "
            "P(> grpo): probability that the method scores higher than GRPO on the same seed "
            "and problem (ties count 1/2; 50 = no difference). Intervals: 95% bootstrap "
            f"resampling seeds and problems, {n_boot} replicates.")
