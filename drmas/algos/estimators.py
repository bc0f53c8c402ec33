"""The advantage estimators, registered by name: what a method's `estimator:` names.

An estimator is one function from the rows of a batch, in batch order, to one advantage per
row, plus its label in tables and figures (in the spirit of verl's `register_adv_est`). The
function receives a `pools.Pools` (the rows' scores and their coded uid, trajectory and agent
ids) and returns float64 advantages; `advantages.compute_advantages(..., estimator=NAME)` calls
it. Registering one is the whole of adding it: the config's schema, `drmas config show`, the
trainer, the tables and `drmas perf advantages` all read this registry. The module needs numpy
only, so loading a config does not load torch or pandas.

The built-ins:
- ``grpo``: vanilla GRPO as upstream computes it since 2026-01-28: per prompt group, one value
  per trajectory (the mean of its rows' scores); every row trains on its trajectory's mean.
- ``grpo_2025``: upstream's vanilla GRPO before 2026-01-28 (commit 3b556f2 to 63b20d6): per
  prompt group, one value per trajectory, the score of its FIRST row in batch order; every row
  is normalised with its OWN score. A prompt group whose first rows score alike has sd = 0, and
  a row with a format penalty then gets -penalty / eps. The paper's runs most likely used it.
- ``drmas``: Dr. MAS: per prompt group and agent, every row's own score.
- the two ablations mixing the mean of one pool with the std of the other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from drmas.algos.pools import Pools, normalised
from drmas.registry import ESTIMATORS

#: the pools a `pool_estimator` can take its mean and std from (`Pools.row_pool`)
POOLS = ("global", "agent", "first_row")

#: fn(pools, norm_by_std=..., eps=...) -> float64 advantages, one per row in batch order
EstimatorFn = Callable[..., np.ndarray]


@dataclass(frozen=True)
class Estimator:
    """One advantage estimator: its function, its label and what its diagnostics need."""

    name: str
    fn: EstimatorFn
    label: str                     # its row label in tables and figures
    help: str = ""
    mean_by: str | None = None     # for a pool estimator: the pool whose mean is subtracted
    std_by: str | None = None      # ... and the pool whose std divides
    baseline: str | None = None    # the prompt-group pool Lemma 4.2 compares each agent with
    batch_order: bool = False      # its result depends on the rows' order (first rows)


def register_estimator(name: str, fn: EstimatorFn | None = None, *, label: str, help: str = "",
                       mean_by: str | None = None, std_by: str | None = None,
                       baseline: str | None = None, batch_order: bool = False) -> Estimator:
    """Register an estimator under `name`: a function `fn`, or the pools `mean_by`/`std_by`
    of `POOLS` (checked here) that `pool_estimator` turns into one. `baseline`: the
    prompt-group pool ("global" or "first_row") of an estimator that normalises every agent
    alike, for which the run logs Lemma 4.2's prediction; `batch_order`: the trainer then
    hands it the rows in upstream's batch order (ARCHITECTURE.md, upstream table)."""
    if fn is None:
        for what, pool in (("mean_by", mean_by), ("std_by", std_by)):
            if pool not in POOLS:
                raise ValueError(f"estimator {name!r}: {what} must be one of {POOLS}, got {pool!r}")
        fn = pool_estimator(mean_by, std_by)
    if baseline is not None and baseline not in ("global", "first_row"):
        raise ValueError(f"estimator {name!r}: baseline must be 'global' or 'first_row'")
    estimator = Estimator(name, fn, label, help, mean_by, std_by, baseline, batch_order)
    ESTIMATORS.add(name, estimator)
    return estimator


def pool_estimator(mean_by: str, std_by: str) -> EstimatorFn:
    """A = (score - mu) / (sd + eps) with mu from pool `mean_by`, sd from pool `std_by`; the
    score follows the mean's pool (a trajectory mean for "global", the row's own otherwise)."""
    def estimate(pools: Pools, *, norm_by_std: bool, eps: float) -> np.ndarray:
        row_pools = {mode: pools.row_pool(mode) for mode in {mean_by, std_by}}
        return normalised(row_pools[mean_by], row_pools[std_by], norm_by_std, eps)
    estimate.__name__ = f"pools_{mean_by}_{std_by}"
    return estimate


register_estimator("grpo", mean_by="global", std_by="global", baseline="global", label="GRPO",
                   help="vanilla GRPO: one pool per prompt group (trajectory means)")
register_estimator("drmas", mean_by="agent", std_by="agent", label="Dr. MAS",
                   help="Dr. MAS: one pool per prompt group and agent")
register_estimator("mean_agent_std_global", mean_by="agent", std_by="global",
                   label="Abl. agent mean / global std",
                   help="ablation: the agent's own baseline, the prompt group's scale")
register_estimator("mean_global_std_agent", mean_by="global", std_by="agent",
                   label="Abl. global mean / agent std",
                   help="ablation: the prompt group's baseline, the agent's own scale")
register_estimator("grpo_2025", mean_by="first_row", std_by="first_row", baseline="first_row",
                   batch_order=True, label="GRPO (upstream 2025)",
                   help="upstream's GRPO before 2026-01-28: trajectories' first rows, rows' own scores")
