"""The ablation table per suite: every trained method against the method it changes.

Each method of a profile is one change to another one, its reference:
- Dr. MAS is GRPO with each agent's advantages normalised within that agent (one flag
  upstream), so its reference is GRPO;
- a named method from `method_defs` (a gradient-clip value, no std division, loss balancing,
  an adaptive KL penalty) changes train settings of its estimator, so its reference is the
  plain method of that estimator (`grpo_clip0.2` -> `grpo`, `drmas_nostd` -> `drmas`);
- the estimator mixes (`mean_agent_std_global`, `mean_global_std_agent`) sit between GRPO and
  Dr. MAS: their reference is GRPO;
- GRPO itself is the baseline (no reference).

Per (assignment, method): the Avg avg@n / pass@n (intervals over seeds and problems), the
difference to the reference trained on the same assignment, paired by seed and problem, and
two stability numbers of the runs: grad-norm spikes per run summed over agents, and the
largest max / median grad norm over agents (`stability.run_stats`), means over seeds with
intervals over seeds. The same numbers appear per agent in the main and stability tables;
this one puts each change beside what it changed.
"""

from __future__ import annotations

import pandas as pd

from drmas.config.profile import Config
from drmas.report import stability
from drmas.report import style
from drmas.report.cells import AVG, interval_cells, metrics_of, paired_cells, sources_of
from drmas.report.intervals import N_BOOT, seed_bootstrap
from drmas.report.style import METHOD_LABEL, row_order

BASELINE = "grpo"
DELTA = "Δ vs reference"
RUNS = "runs"


def reference_of(cfg: Config, method: str) -> str | None:
    """The method `method` changes (see the module docstring); None for GRPO and base."""
    if method in ("base", BASELINE):
        return None
    estimator = cfg.method(method).estimator
    return estimator if estimator != method else BASELINE


def _run_cells(stats: pd.DataFrame, n_boot: int) -> dict:
    """{(assignment, method): {(RUNS, stat): interval over seeds}} from `run_stats` rows."""
    per_run = stats.groupby(["assignment", "method", "seed"]).agg(
        spikes=("spikes", "sum"), max_over_median=("max_over_median", "max")).reset_index()
    cells: dict = {}
    for (assignment, method), runs in per_run.groupby(["assignment", "method"]):
        for stat in ("spikes", "max_over_median"):
            values = runs[stat].dropna().to_numpy()
            if len(values):
                cells.setdefault((assignment, method), {})[(RUNS, stability.STATS[stat])] = \
                    seed_bootstrap(values, n_boot=n_boot)
    return cells


def ablation_table(cfg: Config, long: pd.DataFrame, runs: pd.DataFrame | None = None,
                   k: float = stability.SPIKE_K, n_boot: int = N_BOOT) -> pd.DataFrame:
    """Rows (assignment, method label) of the trained methods in table order; columns
    (Avg, metric), ("", "reference"), (DELTA, metric), then (RUNS, spikes / run) and
    (RUNS, max / median grad norm) when run folders are given, and ("", "seeds")."""
    style.use_config(cfg)
    trained = long[long.method != "base"]
    sources, metrics = sources_of(long), metrics_of(long)
    run_cells = _run_cells(stability.run_stats(runs, k), n_boot) if runs is not None else {}
    keys = {(a, m): None for a, m in zip(trained.assignment, trained.method)}
    rows, index = [], []
    for assignment, method in row_order(keys, cfg.assignments):
        frame = trained[(trained.assignment == assignment) & (trained.method == method)]
        cells = {c: v for c, v in interval_cells(frame, sources, metrics, n_boot).items()
                 if c[0] == AVG}
        ref = reference_of(cfg, method)
        ref_frame = trained[(trained.assignment == assignment) & (trained.method == ref)]
        if ref is None:
            cells[("", "reference")] = "(baseline)"
        elif not len(ref_frame):
            cells[("", "reference")] = f"{METHOD_LABEL.get(ref, ref)} (not run)"
        else:
            delta = paired_cells(frame, ref_frame, sources, metrics, n_boot) or {}
            cells.update({(DELTA, m): v for (s, m), v in delta.items() if s == AVG})
            cells[("", "reference")] = METHOD_LABEL.get(ref, ref)
        cells.update(run_cells.get((assignment, method), {}))
        cells[("", "seeds")] = frame.seed.nunique()
        rows.append(cells)
        index.append((assignment, METHOD_LABEL.get(method, method)))
    columns = ([(AVG, m) for m in metrics] + [("", "reference")] + [(DELTA, m) for m in metrics]
               + ([(RUNS, stability.STATS[s]) for s in ("spikes", "max_over_median")]
                  if runs is not None else []) + [("", "seeds")])
    return pd.DataFrame([[row.get(c) for c in columns] for row in rows],
                        index=pd.MultiIndex.from_tuples(index, names=["assignment", "method"]),
                        columns=pd.MultiIndex.from_tuples(columns))


def note(k: float = stability.SPIKE_K, n_boot: int = N_BOOT) -> str:
    """What the ablation table's cells mean (printed under it)."""
    return (f"Each method against the method it changes (`reference`): Dr. MAS against GRPO, a "
            f"named ablation against its estimator's plain method. Avg cells: mean over seeds "
            f"and test problems [95% bootstrap interval resampling both, {n_boot} replicates]; "
            f"{DELTA}: paired by seed and problem with the reference trained on the same "
            f"assignment; an interval that excludes 0 separates the two. Runs: spikes (grad "
            f"norm above {k:g} × the median of the earlier steps) summed over agents, and the "
            "largest max / median grad norm over agents; means over seeds [95% bootstrap "
            "interval over seeds].")
