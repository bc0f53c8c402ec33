"""Pre-clip gradient norms compared across methods on a common scale: the gradient-norm table.

The stability table's spikes are judged against each run's own running median, which reads a
steady inflation as no spike and a mostly-zero gradient (most pools constant) as spiky. Here
every run's per-agent pre-clip norms are set against one reference: the median pre-clip norm of
the same agent in the GRPO run of the same assignment and seed (`REFERENCE`; with no such run,
of all that assignment's GRPO runs). Per (assignment, method, agent), over its seeds:

- ``median``: the median of the run's pre-clip norms, averaged over seeds (absolute);
- ``max``: the largest pre-clip norm of any step of any seed (absolute);
- ``max / ref``: the run's largest norm over the reference, the largest over seeds;
- ``steps > 10x ref``, ``steps > 100x ref``: the share of the agent's steps (%) over 10x and
  100x the reference, all seeds pooled;
- ``runs > 100x ref``: how many seeds had such a step, of how many;
- ``max abs(A)``: the largest advantage any of the agent's rows trained on;
- ``same-batch ratio``: the median over measured steps of grad_sq(method) / grad_sq(grpo)
  from the paired measurement (`train.paired_every`), where the run measured both.

Norms are before clipping (`grad_clip` bounds the step's size, not this number). Non-finite
norms are left out here and counted in the stability table.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from drmas.report.style import row_order

REFERENCE = "grpo"
COLUMNS = ["median", "max", "max / ref", "steps > 10x ref (%)", "steps > 100x ref (%)",
           "runs > 100x ref", "max abs(A)", "same-batch ratio"]


def _finite(values) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64)
    return v[np.isfinite(v)]


def reference_medians(runs: pd.DataFrame) -> dict:
    """{(assignment, seed, agent): median pre-clip norm of the GRPO run}, and per
    (assignment, agent) the median over all its GRPO runs' steps under seed None."""
    ref = runs[runs.method == REFERENCE]
    out = {}
    for (assignment, seed, agent), run in ref.groupby(["assignment", "seed", "agent"]):
        g = _finite(run.grad_norm)
        if len(g):
            out[assignment, seed, agent] = float(np.median(g))
    for (assignment, agent), run in ref.groupby(["assignment", "agent"]):
        g = _finite(run.grad_norm)
        if len(g):
            out[assignment, None, agent] = float(np.median(g))
    return out


def gradnorm_table(runs: pd.DataFrame, assignments: list[str] | None = None) -> pd.DataFrame | None:
    """Rows (assignment, method, agent) in table order, columns `COLUMNS`; None without a
    GRPO run to compare with."""
    refs = reference_medians(runs)
    if not refs:
        return None
    rows, index = [], []
    keys = row_order({(a, m) for a, m in zip(runs.assignment, runs.method)}, assignments or [])
    for assignment, method in keys:
        mine = runs[(runs.assignment == assignment) & (runs.method == method)]
        for agent in dict.fromkeys(mine.agent):
            rows.append(_agent_row(mine[mine.agent == agent], assignment, agent, refs))
            index.append((assignment, method, agent))
    return pd.DataFrame(rows, columns=COLUMNS, index=pd.MultiIndex.from_tuples(
        index, names=["assignment", "method", "agent"]))


def _agent_row(runs: pd.DataFrame, assignment: str, agent: str, refs: dict) -> list:
    medians, ratios, over10, over100, steps, spiking, seeds = [], [], 0, 0, 0, 0, 0
    for seed, run in runs.groupby("seed"):
        g = _finite(run.grad_norm)
        if not len(g):
            continue
        seeds += 1
        ref = refs.get((assignment, seed, agent), refs.get((assignment, None, agent)))
        medians.append(float(np.median(g)))
        if ref:
            ratios.append(float(g.max()) / ref)
            over10 += int((g > 10 * ref).sum())
            over100 += int((g > 100 * ref).sum())
            spiking += bool((g > 100 * ref).any())
        steps += len(g)
    all_g = _finite(runs.grad_norm)
    absmax = _finite(runs.adv_absmax) if "adv_absmax" in runs else np.array([])
    return [float(np.mean(medians)) if medians else np.nan,
            float(all_g.max()) if len(all_g) else np.nan,
            max(ratios) if ratios else np.nan,
            100.0 * over10 / steps if ratios and steps else np.nan,
            100.0 * over100 / steps if ratios and steps else np.nan,
            f"{spiking}/{seeds}" if ratios else "",
            float(absmax.max()) if len(absmax) else np.nan,
            _same_batch(runs)]


def _same_batch(runs: pd.DataFrame) -> float:
    """Median over measured steps of grad_sq(this method's estimator) / grad_sq(grpo)."""
    method = runs.method.iloc[0]
    column = f"grad_sq_{method}"
    if column not in runs or "grad_sq_grpo" not in runs:
        return np.nan
    both = runs[[column, "grad_sq_grpo"]].dropna()
    both = both[both.grad_sq_grpo > 0]
    return float(np.median(both[column] / both.grad_sq_grpo)) if len(both) else np.nan


def as_text(table: pd.DataFrame) -> pd.DataFrame:
    """Cells as strings: norms to 3 significant digits, shares to 0.1, |A| in scientific."""
    def cell(column, value):
        if isinstance(value, str):
            return value
        if value is None or not np.isfinite(value):
            return ""
        if column == "max abs(A)":
            return f"{value:.3g}"
        if column.startswith("steps"):
            return f"{value:.1f}"
        return f"{value:.3g}"
    return pd.DataFrame([[cell(c, v) for c, v in zip(table.columns, row)] for row in table.to_numpy()],
                        index=table.index, columns=table.columns)


def to_markdown(table: pd.DataFrame, title: str, labels: dict) -> str:
    text = as_text(table)
    lines = [f"### {title}", "", "| assignment | method | agent | " + " | ".join(text.columns) + " |",
             "|---|---|---|" + "---:|" * len(text.columns)]
    for (assignment, method, agent), row in text.iterrows():
        lines.append(f"| {assignment} | {labels.get(method, method)} | {agent} | "
                     + " | ".join(row) + " |")
    note = ("Pre-clip gradient norms per agent; ref = the median pre-clip norm of the same agent "
            "in the GRPO run of the same assignment and seed. Same-batch ratio: the median over "
            "the paired measurement's steps of the squared norm with this method's advantages "
            "over GRPO's, on the same rows and weights.")
    return "\n".join(lines + ["", note]) + "\n"
