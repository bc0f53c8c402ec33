"""The advantage estimators, registered by name: what a method's `estimator:` names.

An estimator here is a pair of pools (`advantages.compute_advantages`): the pool whose mean
is the baseline and the pool whose std is the scale, each `global` (per prompt group, one
value per trajectory: vanilla GRPO) or `agent` (per prompt group and agent, one value per
row: Dr. MAS), plus its label in tables and figures. Registering one is the whole of adding
it: the config's schema, `drmas config show`, the trainer, the tables and `drmas perf
advantages` all read this registry (in the spirit of verl's `register_adv_est`). The module
imports nothing heavy, so loading a config does not load torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from drmas.registry import ESTIMATORS

POOLS = ("global", "agent")


@dataclass(frozen=True)
class Estimator:
    """One advantage estimator: where its baseline and its scale come from."""

    name: str
    mean_by: str     # "global" | "agent": the pool whose mean is subtracted
    std_by: str      # "global" | "agent": the pool whose std divides
    label: str       # its row label in tables and figures
    help: str = ""


def register_estimator(name: str, *, mean_by: str, std_by: str, label: str, help: str = "") -> Estimator:
    """Register an estimator under `name`; its `mean_by` / `std_by` pools are checked here."""
    for what, pool in (("mean_by", mean_by), ("std_by", std_by)):
        if pool not in POOLS:
            raise ValueError(f"estimator {name!r}: {what} must be one of {POOLS}, got {pool!r}")
    estimator = Estimator(name, mean_by, std_by, label, help)
    ESTIMATORS.add(name, estimator)
    return estimator


register_estimator("grpo", mean_by="global", std_by="global", label="GRPO",
                   help="vanilla GRPO: one pool per prompt group (trajectory means)")
register_estimator("drmas", mean_by="agent", std_by="agent", label="Dr. MAS",
                   help="Dr. MAS: one pool per prompt group and agent")
register_estimator("mean_agent_std_global", mean_by="agent", std_by="global",
                   label="Abl. agent mean / global std",
                   help="ablation: the agent's own baseline, the prompt group's scale")
register_estimator("mean_global_std_agent", mean_by="global", std_by="agent",
                   label="Abl. global mean / agent std",
                   help="ablation: the prompt group's baseline, the agent's own scale")
