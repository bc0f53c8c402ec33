"""The one place an optimiser and its learning-rate schedule are built: RL updates, warm
starts and `drmas check numerics` all take AdamW from here, so a change of optimiser settings
is one edit, and `learning_rate` is what every job logs as its rate."""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch


def adamw(params: Iterable[torch.nn.Parameter], *, lr: float, weight_decay: float = 0.01,
          betas: tuple[float, float] = (0.9, 0.999)) -> torch.optim.AdamW:
    """AdamW (torch's defaults but for the arguments): float32 state beside each parameter."""
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, betas=betas)


def warmup_cosine(optimizer: torch.optim.Optimizer, steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up over the first twentieth of `steps` (at least one step), then cosine
    decay to 0 at `steps`: the warm starts' schedule."""
    warm = max(1, steps // 20)
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)))


def learning_rate(optimizer: torch.optim.Optimizer | None) -> float | None:
    """The rate the optimiser's next step uses (its first parameter group's), None without one."""
    return float(optimizer.param_groups[0]["lr"]) if optimizer is not None else None
