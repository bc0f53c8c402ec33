"""The paired same-batch gradient measurement: how large the policy gradient of the
same rows, under the same weights, is with one advantage vector or another.

The PPO-clip surrogate's gradient at ratio 1 (before any optimiser step of the batch, the new
policy is the behaviour one), without clip, entropy or KL terms, is the score-function gradient

    g(A) = -grad_theta (sum over rows i and their response tokens t of w_i A_i logp_it) / denom,

linear in the advantages A. `surrogate_grad_sq` returns ||g(A)||^2 for several named advantage
vectors on the same micro-batches: what GRPO's and Dr. MAS's advantages would do to one model
on one batch, where comparing the two runs' logged norms compares different policies on
different batches after step 0. The ratio of two of them does not depend on `denom`.

Pure torch, no torch.distributed: a sharded caller passes the hooks (`backward`, `sq_norm`,
`reduce`) that make it exact over ranks (drmas/train/workers.py, `paired_grad_sq`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import torch

#: one micro-batch: a callable giving (logprobs (B, T) with graph, mask (B, T), row indices (B,))
#: into the advantage vectors, or None when this caller has no rows for it (it has then done
#: whatever it must, e.g. joined a sharded model's collectives with a zero gradient)
MicroBatch = Callable[[], "tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None"]


def _sq_norm(grads: Sequence[torch.Tensor]) -> float:
    return float(sum(g.detach().double().pow(2).sum() for g in grads))


def surrogate_loss(logprobs: torch.Tensor, mask: torch.Tensor, advantages: torch.Tensor,
                   denom: float, row_weights: torch.Tensor | None = None) -> torch.Tensor:
    """-(sum over rows b and tokens t of w_b A_b logp_bt mask_bt) / denom: the PPO surrogate at
    ratio 1 without clip, entropy or KL (its gradient is the policy-gradient term)."""
    coef = advantages.to(logprobs.dtype)
    if row_weights is not None:
        coef = coef * row_weights.to(logprobs.dtype)
    return -(logprobs * mask.to(logprobs.dtype) * coef.unsqueeze(-1)).sum() / denom


def surrogate_grad_sq(params: Sequence[torch.nn.Parameter], micro_batches: Sequence[MicroBatch],
                      advantages: Mapping[str, torch.Tensor], denom: float,
                      row_weights: torch.Tensor | None = None, *,
                      backward: Callable[[torch.Tensor], None] | None = None,
                      sq_norm: Callable[[list[torch.Tensor]], float] | None = None,
                      reduce: Callable[[list[float]], list[float]] | None = None) -> dict[str, float]:
    """{name: ||grad of the summed `surrogate_loss` over `micro_batches`||^2} per advantage set.

    `advantages` maps a name to a vector over all rows (indexed by each micro-batch's row
    indices), `row_weights` likewise (None: 1); `denom` is the one token denominator of every
    micro-batch. Each set is one pass over the micro-batches, gradients accumulating in the
    parameters' `.grad` (as a training step does, so a sharded model reduces them as usual);
    `params`' gradients are as before on return. Hooks: `backward(loss)` (default
    `loss.backward()`; a caller whose framework averages gradients over ranks scales the loss
    here), `sq_norm(grads)` (default: the float64 sum of squares) of the `.grad`s present, and
    `reduce(values)` (default: identity) summing the squared norms over ranks.
    """
    params = list(params)
    backward = backward or (lambda loss: loss.backward())
    sq_norm = sq_norm or _sq_norm
    saved = [p.grad for p in params]
    out = []
    try:
        for name, adv in advantages.items():
            for p in params:
                p.grad = None
            for batch in micro_batches:
                got = batch()
                if got is None:
                    continue
                lp, mask, rows = got
                rows = rows.to(adv.device)
                w = row_weights[rows].to(lp.device) if row_weights is not None else None
                backward(surrogate_loss(lp, mask, adv[rows].to(lp.device), denom, w))
            out.append(sq_norm([p.grad for p in params if p.grad is not None]))
    finally:
        for p, g in zip(params, saved):
            p.grad = g
    return dict(zip(advantages, reduce(out) if reduce is not None else out))
