"""Training stability per run and agent, and the stability table per suite.

Per run and agent, from its `metrics.jsonl` (see `runs.load_runs`):
- spikes: steps whose gradient norm (before clipping) exceeds ``k`` times the running
  median, the median of the agent's norms at all earlier steps of the run. A step needs
  ``MIN_HISTORY`` earlier steps to be judged (a median of one or two steps says little).
  ``k`` defaults to ``SPIKE_K`` = 3, a choice (`drmas table/plot --spike-k`): a norm three
  times the run's typical one stands far outside step-to-step noise, while k = 2 also
  flags the ordinary drift of a short run's first steps;
- max / median gradient norm over the run;
- clip fraction and approximate KL, means over steps (the agent's own when logged);
- skipped steps: optimiser steps of the agent's worker group skipped for a non-finite norm;
- non-finite steps: steps where the agent's grad norm or reward, its group's loss or the team
  reward was logged as NaN or infinite (`runs.NONFINITE_SOURCES`): a diverged step is the
  most important row of a stability table, so it is counted here, not dropped (such a norm
  is neither judged as a spike nor part of the max / median).

The table gives, per assignment x method, the mean of each number over seeds with a 95%
bootstrap interval over seeds (`intervals.seed_bootstrap`; one seed gives the value alone).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from drmas.report.intervals import N_BOOT, seed_bootstrap
from drmas.report.style import row_order

SPIKE_K = 3.0
MIN_HISTORY = 3
STATS = {"spikes": "spikes / run", "max_over_median": "max / median grad norm",
         "clip_frac": "clip fraction (%)", "approx_kl": "approx KL (×1e-3)",
         "skipped_steps": "skipped steps", "nonfinite": "non-finite steps"}
_SCALE = {"clip_frac": 100.0, "approx_kl": 1e3}


def spike_mask(norms, k: float = SPIKE_K, min_history: int = MIN_HISTORY) -> np.ndarray:
    """True at steps whose norm exceeds k x the median of all earlier steps' norms (NaN
    norms, e.g. an agent without rows that step, are neither judged nor counted)."""
    norms = np.asarray(norms, dtype=np.float64)
    out = np.zeros(len(norms), dtype=bool)
    seen: list[float] = []
    for i, g in enumerate(norms):
        if np.isnan(g):
            continue
        if len(seen) >= min_history and g > k * float(np.median(seen)):
            out[i] = True
        seen.append(g)
    return out


def run_stats(df: pd.DataFrame, k: float = SPIKE_K) -> pd.DataFrame:
    """One row per (assignment, method, seed, agent) with the numbers of `STATS`."""
    rows = []
    keys = ["assignment", "method", "seed", "agent"]
    for key, run in df.sort_values("step").groupby(keys, sort=False):
        g = run["grad_norm"].to_numpy(dtype=np.float64)
        g = np.where(np.isfinite(g), g, np.nan)         # counted in `nonfinite` instead
        finite = g[~np.isnan(g)]
        rows.append({**dict(zip(keys, key)),
                     "spikes": int(spike_mask(g, k).sum()),
                     "max_over_median": (float(finite.max() / np.median(finite))
                                         if len(finite) and np.median(finite) > 0 else np.nan),
                     "clip_frac": float(run["clip_frac"].mean()),
                     "approx_kl": float(run["approx_kl"].mean()),
                     "skipped_steps": float(run["skipped_steps"].fillna(0).sum()),
                     "nonfinite": (int(run["nonfinite"].fillna(False).astype(bool).sum())
                                   if "nonfinite" in run else 0),
                     "steps": int(len(run))})
    return pd.DataFrame(rows)


def stability_table(df: pd.DataFrame, k: float = SPIKE_K, n_boot: int = N_BOOT,
                    assignments: list[str] = ()) -> pd.DataFrame:
    """Rows (assignment, method) in the order of `assignments` and the paper's order of
    methods; columns (agent, stat) holding `Interval`s over seeds."""
    stats = run_stats(df, k)
    cells: dict = {}
    for (assignment, method, agent), runs in stats.groupby(["assignment", "method", "agent"],
                                                           sort=False):
        for stat in STATS:
            values = runs[stat].dropna().to_numpy() * _SCALE.get(stat, 1.0)
            if len(values):
                cells.setdefault((assignment, method), {})[(agent, stat)] = seed_bootstrap(
                    values, n_boot=n_boot)
    table = pd.DataFrame.from_dict({i: cells[i] for i in row_order(cells, assignments)},
                                   orient="index")
    table.index.names = ["assignment", "method"]
    return table


def note(k: float = SPIKE_K, n_boot: int = N_BOOT) -> str:
    """What the stability table's cells mean (printed under it)."""
    return (f"Per run and agent: spikes = steps whose grad norm (before clipping) exceeds "
            f"{k:g} × the median of the earlier steps (judged from step {MIN_HISTORY + 1} on); "
            "max / median of the grad norm over the run; clip fraction and approx KL = means "
            "over steps; skipped steps = optimiser steps skipped for a non-finite norm; non-finite "
            "steps = steps whose grad norm, reward or loss was NaN or infinite. Cells: "
            f"mean over seeds [95% bootstrap interval over seeds, {n_boot} replicates; one "
            "seed: the value alone].")
