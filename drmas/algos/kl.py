"""KL penalty in the reward against a frozen reference model, with verl's adaptive controller
(upstream: `algorithm.use_kl_in_reward=True`, `kl_penalty=kl`, `kl_ctrl.type=adaptive`).

Per response token, k1 = behaviour logprob - reference logprob. verl subtracts beta x k1
from the token-level rewards, and GRPO's outcome score is their sum over the response, so a
row's score becomes score - beta x sum_t k1_t. The controller sees the batch's mean KL: the
per-row token mean of k1, averaged over rows (a row without response tokens counts 0), and
after the rewards are formed it updates beta with the batch's row count as its step count:

    error = clip(mean_kl / target - 1, -0.2, 0.2);  beta *= 1 + error x rows / horizon

(Ziegler et al. 2019, as in verl's AdaptiveKLController). The beta applied in a step is the
one before that step's update. Pure functions and plain state: the trainer keeps beta in its
checkpoint state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

ERROR_CLIP = 0.2


@dataclass
class AdaptiveKLController:
    """beta (`value`) moved toward the KL target; `update` is verl's rule exactly."""

    value: float
    target: float
    horizon: int

    def __post_init__(self):
        if self.horizon <= 0:
            raise ValueError(f"horizon must be > 0, got {self.horizon}")

    def update(self, current_kl: float, n_steps: int) -> None:
        error = float(np.clip(current_kl / self.target - 1.0, -ERROR_CLIP, ERROR_CLIP))
        self.value *= 1.0 + error * n_steps / self.horizon

    @classmethod
    def of(cls, settings) -> "AdaptiveKLController":
        """The controller a train-settings object describes (kl_coef, kl_target, kl_horizon)."""
        return cls(settings.kl_coef, settings.kl_target, settings.kl_horizon)


def row_kl(logprobs: Sequence[Sequence[float]], ref_logprobs: Sequence[Sequence[float]]):
    """(sum, token mean) of k1 per row, two float64 arrays (N,); a row without tokens: 0, 0."""
    sums, means = np.zeros(len(logprobs)), np.zeros(len(logprobs))
    for i, (lp, ref) in enumerate(zip(logprobs, ref_logprobs, strict=True)):
        if len(lp) != len(ref):
            raise ValueError(f"row {i}: {len(lp)} behaviour logprobs, {len(ref)} reference ones")
        if len(lp):
            k1 = np.asarray(lp, dtype=np.float64) - np.asarray(ref, dtype=np.float64)
            sums[i], means[i] = k1.sum(), k1.mean()
    return sums, means


def kl_in_reward(scores, logprobs, ref_logprobs, ctrl: AdaptiveKLController):
    """Shaped scores (score - beta x row KL sum), the row KL sums, and the metrics of the
    step: `beta` (the one applied), `mean_kl` (what the controller saw), `penalty` (mean of
    beta x row KL). Updates `ctrl` in place."""
    sums, means = row_kl(logprobs, ref_logprobs)
    beta = ctrl.value
    shaped = np.asarray(scores, dtype=np.float64) - beta * sums
    mean_kl = float(means.mean()) if len(means) else 0.0
    ctrl.update(mean_kl, len(means))
    return shaped, sums, {"beta": beta, "mean_kl": mean_kl,
                          "penalty": float(beta * sums.mean()) if len(sums) else 0.0}
