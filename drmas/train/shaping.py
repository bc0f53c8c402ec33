"""The optional per-row terms between the reward and the update (the paper's ablations):
the KL penalty in the reward against each group's frozen reference model, and loss balancing
by agent frequency. Both are off by default; off, they touch no row and draw no random number.

- `kl_in_reward` (before advantages): each group scores its own rows under its reference
  model (drmas/train/reference.py); a row's `score` becomes score - beta x KL (drmas/algos/
  kl.py) and its KL sum is kept as `kl`; beta is driver state, saved in the trainer's
  checkpoint state with the reference weights' digests (checked on resume).
- `loss_weights` (any time before the update): each row gets a `loss_weight`
  (drmas/algos/balance.py), which the group's loss multiplies into its token losses.
"""

from __future__ import annotations

import numpy as np

from drmas.algos.balance import loss_balance_weights
from drmas.algos.kl import AdaptiveKLController, kl_in_reward


def _per_agent_mean(rows: list[dict], key: str) -> dict[str, float]:
    agents = dict.fromkeys(r["agent"] for r in rows)
    return {a: float(np.mean([r[key] for r in rows if r["agent"] == a])) for a in agents}


class RowShaping:
    """Holds the KL controller of a run (when the KL is in the reward)."""

    def __init__(self, settings):
        self.settings = settings
        self.kl = AdaptiveKLController.of(settings) if settings.kl_in_reward else None

    # -- KL in the reward ----------------------------------------------------------------
    def apply_kl(self, rows: list[dict], groups: dict) -> dict | None:
        """Shape the rows' scores in place; the step's `kl_ctrl` metrics (None when off)."""
        if self.kl is None:
            return None
        ref = reference_logprobs(rows, groups)
        shaped, sums, metrics = kl_in_reward([r["score"] for r in rows],
                                             [r["logprobs"] for r in rows], ref, self.kl)
        for row, score, kl in zip(rows, shaped.tolist(), sums.tolist()):
            row["score"], row["kl"] = score, kl
        metrics["agents"] = _per_agent_mean(rows, "kl")
        return metrics

    # -- loss balance --------------------------------------------------------------------
    def add_loss_weights(self, rows: list[dict]) -> dict | None:
        """Give every row its `loss_weight`; per agent the mean weight (None when off)."""
        if not self.settings.loss_balance:
            return None
        weights = loss_balance_weights([r["uid"] for r in rows], [r["agent"] for r in rows])
        for row, w in zip(rows, weights.tolist()):
            row["loss_weight"] = w
        return _per_agent_mean(rows, "loss_weight")

    # -- checkpoint state ----------------------------------------------------------------
    def state(self, groups: dict) -> dict | None:
        """What a checkpoint must hold to resume exactly (None when the KL is off)."""
        if self.kl is None:
            return None
        return {"kl_beta": self.kl.value,
                "reference": {g: grp.reference_digest() for g, grp in groups.items()}}

    def load_state(self, state: dict | None, groups: dict) -> None:
        """Restore beta; raise ValueError when a group's reference model is not the one the
        checkpoint was made with (the trainer then treats the checkpoint as unusable)."""
        if self.kl is None:
            return
        if state is None:
            raise ValueError("the checkpoint holds no KL controller state")
        for g, grp in groups.items():
            saved, now = state["reference"].get(g), grp.reference_digest()
            if saved != now:
                raise ValueError(f"group {g}'s reference model differs from the checkpoint's "
                                 f"(digest {now}, saved {saved})")
        self.kl.value = float(state["kl_beta"])


def reference_logprobs(rows: list[dict], groups: dict) -> list[list[float]]:
    """Every row's reference logprobs, each group scoring its own rows, in row order."""
    out: list[list[float]] = [[] for _ in rows]
    for g, grp in groups.items():
        mine = [i for i, r in enumerate(rows) if r["group"] == g]
        if mine:
            part = [{k: rows[i][k] for k in ("prompt_ids", "response_ids")} for i in mine]
            for i, lp in zip(mine, grp.ref_logprobs(part), strict=True):
                out[i] = lp
    return out
