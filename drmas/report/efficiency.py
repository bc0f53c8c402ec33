"""Efficiency per assignment: where a training step's time goes and how much memory it takes.

The paper claims that heterogeneous assignments (a larger model only where it matters) stay
effective "while improving efficiency". This table reads what every run already logs per
step in `metrics.jsonl`:
- `time.<phase>`: wall seconds of the step's phases, measured by the driver: `generate`
  (rollouts, all agents), `reward`, `advantages`, `update` (PPO mini-updates of every worker
  group), `sync` (weights pushed to the rollout engines), `paired` (the paired gradient
  measurement, `train.paired_every`: only on the steps that measure, so its median is per
  measured step; absent from runs without it), `total` (the whole step, `paired` included);
- `tokens_per_s`: generated tokens per second of `generate`;
- `memory.<group>`: each worker group's peak memory so far (`peak_rss_mb`: the resident set
  of its process on a CPU; `peak_mem_mb`: torch's peak allocation on a GPU).

Per run a phase counts as its median over steps (the first step pays one-off costs such as
compiling and allocating; a median ignores it without a rule for which steps to drop), the
memory as its value at the last step: the largest group's peak and the sum over groups (what
the run needs at once when every group lives on the same machine), counting a process that
holds several groups once. Cells are means over
seeds with a 95% bootstrap interval over seeds (`intervals.seed_bootstrap`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from drmas.errors import DataError
from drmas.report.intervals import N_BOOT, seed_bootstrap
from drmas.report.style import row_order

PHASES = ["generate", "update", "sync", "paired", "total"]
COLUMNS = {**{p: f"{p} (ms/step)" for p in PHASES},
           "paired": "paired (ms/measured step)",
           "tokens_per_s": "rollout tokens/s",
           "peak_max_mb": "peak memory, largest group (MB)",
           "peak_sum_mb": "peak memory, all groups (MB)"}


def _peaks(memory: dict, one_process: bool = False) -> list[float]:
    """Each group's peak; with `one_process` (`backend: local`: every group lives in the
    trainer's process and reports that process's peak) the one process's peak, once."""
    peaks = [float(v) for g in (memory or {}).values() for k, v in g.items()
             if k in ("peak_rss_mb", "peak_mem_mb") and isinstance(v, (int, float))]
    return [max(peaks)] if one_process and peaks else peaks


def run_efficiency(run: str | Path) -> dict:
    """One run's numbers (see the module docstring), with its assignment, method and seed."""
    from drmas.data.io import read_jsonl, read_yaml

    run = Path(run)
    for name in ("config.yaml", "metrics.jsonl"):
        if not (run / name).exists():
            raise DataError(f"run folder {run} lacks {name}")
    meta = read_yaml(run / "config.yaml", what="run config (written by `drmas train`)")
    steps = read_jsonl(run / "metrics.jsonl")            # bounded, regular files only
    if not steps:
        raise DataError(f"run folder {run}: metrics.jsonl has no steps")
    row = {"assignment": meta["assignment"], "method": meta["method"], "seed": meta["seed"]}
    for phase in PHASES:
        times = [m["time"][phase] for m in steps if phase in m.get("time", {})]
        row[phase] = 1e3 * float(np.median(times)) if times else np.nan
    rates = [m["tokens_per_s"] for m in steps if isinstance(m.get("tokens_per_s"), (int, float))]
    row["tokens_per_s"] = float(np.median(rates)) if rates else np.nan
    local = (meta.get("config") or {}).get("resources", {}).get("backend") == "local"
    peaks = _peaks(steps[-1].get("memory"), one_process=local)
    row["peak_max_mb"] = max(peaks) if peaks else np.nan
    row["peak_sum_mb"] = sum(peaks) if peaks else np.nan
    return row


def efficiency_table(run_dirs: list[str], n_boot: int = N_BOOT,
                     assignments: list[str] = ()) -> pd.DataFrame:
    """Rows (assignment, method) in the order of `assignments` and the paper's order of
    methods; columns `COLUMNS` holding `Interval`s over seeds."""
    runs = pd.DataFrame([run_efficiency(r) for r in run_dirs])
    cells = {}
    for (assignment, method), group in runs.groupby(["assignment", "method"], sort=False):
        cells[(assignment, method)] = {
            ("", label): seed_bootstrap(group[key].to_numpy(), n_boot=n_boot)
            for key, label in COLUMNS.items() if group[key].notna().all()}
    table = pd.DataFrame.from_dict({i: cells[i] for i in row_order(cells, assignments)},
                                   orient="index")
    table.index.names = ["assignment", "method"]
    if len(table.columns):
        table.columns = pd.MultiIndex.from_tuples(table.columns)
    return table


def note(n_boot: int = N_BOOT) -> str:
    """What the efficiency table's cells mean (printed under it)."""
    return ("Per run: each phase's median wall time over steps (ms; `paired`, the paired "
            "gradient measurement, over the steps that measure it, and included in `total` "
            "there), the median rollout throughput, "
            "and the worker groups' peak memory at the last step (CPU: resident set per "
            "process; GPU: torch's peak allocation). Cells: mean over seeds [95% bootstrap "
            f"interval over seeds, {n_boot} replicates; one seed: the value alone]. Times "
            "depend on the machine and its load: compare rows of one table only.")
