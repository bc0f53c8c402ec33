"""PPO-clip policy loss with dual clip and token-mean aggregation (verl semantics), plus the
entropy and gradient-norm helpers the trainer logs.

The paper trains with clip 0.2/0.2, dual-clip 3.0, token-mean loss, no KL term and grad
clip 1.0; gradient-norm spikes are its main diagnostic, so the norm is reported *before*
clipping and non-finite norms are surfaced instead of silently corrupting the weights.

Three training-semantics switches (`LossOptions`, read from a group's train settings) choose
between this harness's defaults and the paper's fork of verl: an entropy bonus, how token
losses are averaged over the micro-batches of a mini-batch, and whether the log-ratio is
clamped before `exp`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields

import torch

from drmas.errors import ConfigError

#: default log-ratio clamp before exp: keeps exp() finite for wildly stale tokens.
_LOG_RATIO_LIMIT = 20.0
AGGREGATIONS = ("minibatch", "verl")


@dataclass(frozen=True)
class LossOptions:
    """How the policy loss of a mini-batch is formed.

    - `entropy_coeff`: loss -= coeff * token-mean entropy (the paper's search runs use verl's
      default 0.001; 0 turns the term off).
    - `loss_aggregation`: `minibatch` divides every token loss by the mini-batch's token
      count, so micro-batches add up to one token mean whatever the split; `verl` takes the
      token mean of each micro-batch and then the mean over micro-batches (rows of short
      micro-batches weigh more), with the micro-batches upstream would run: the worker
      weighs each row as in upstream's layout (`verl_row_denominators`), whatever
      micro-batches it runs itself.
    - `log_ratio_clamp`: log-ratios are clamped to +-this before `exp`; None: no clamp (verl).
    """

    entropy_coeff: float = 0.0
    loss_aggregation: str = "minibatch"
    log_ratio_clamp: float | None = _LOG_RATIO_LIMIT

    def __post_init__(self):
        if self.loss_aggregation not in AGGREGATIONS:
            raise ConfigError(f"loss_aggregation must be one of {', '.join(AGGREGATIONS)}, "
                              f"got {self.loss_aggregation!r}")

    @classmethod
    def of(cls, settings) -> "LossOptions":
        """The options a train-settings object carries (missing fields keep the defaults)."""
        return cls(**{f.name: getattr(settings, f.name) for f in fields(cls) if hasattr(settings, f.name)})

    def scale(self, minibatch_tokens: float, n_micro: int = 1,
              row_denominators: Mapping[int, float] | None = None) -> "LossScale":
        return LossScale(self.loss_aggregation, minibatch_tokens, n_micro, row_denominators)


@dataclass(frozen=True)
class LossScale:
    """The denominator of one micro-batch's summed token losses, so that the micro-batch
    losses of a mini-batch add up to its aggregate (see LossOptions.loss_aggregation).

    With `row_denominators` (verl: {row index: denominator}, from `verl_row_denominators`)
    a micro-batch given its row indices gets one denominator per row instead: the mini-batch
    aggregate is then upstream's whatever the micro-batches that compute it."""

    mode: str
    minibatch_tokens: float
    n_micro: int
    row_denominators: Mapping[int, float] | None = None

    def __call__(self, micro_tokens: float, rows: Sequence[int] | None = None):
        """A number, or (`row_denominators` and the micro-batch's row indices `rows` given)
        a (B,) float64 tensor, one denominator per row."""
        if self.row_denominators is not None and rows is not None:
            return torch.tensor([self.row_denominators[i] for i in rows], dtype=torch.float64)
        if self.mode == "verl":
            return max(float(micro_tokens), 1.0) * self.n_micro
        return self.minibatch_tokens


def verl_row_denominators(response_tokens: Sequence[int], micro_batch_rows: int,
                          world: int = 1) -> list[float]:
    """What each row's token losses are divided by in upstream's verl token-mean, for one
    mini-batch whose rows' response-token counts are `response_tokens`, in data order.

    Upstream (verl's dp_actor) deals the mini-batch to `world` ranks in contiguous shares,
    splits each share into micro-batches of `micro_batch_rows` consecutive rows (agents
    mixed, in data order), takes each micro-batch's token mean, divides it by the rank's
    number of micro-batches (gradient accumulation), and FSDP averages the ranks' gradients.
    A row in a micro-batch of T tokens on a rank with m micro-batches is therefore divided
    by world x m x T (= the number of upstream micro-batches x T when every rank has m):
    summing every token loss over its row's denominator gives upstream's mini-batch loss,
    however the rows are then batched. Shares differ by at most one row when the mini-batch
    does not divide by `world` (verl requires that it does); a micro-batch without response
    tokens counts as T = 1, as `LossScale`.
    """
    if micro_batch_rows < 1 or world < 1:
        raise ValueError("micro_batch_rows and world must be >= 1")
    n = len(response_tokens)
    q, r = divmod(n, world)
    out: list[float] = []
    start = 0
    for rank in range(world):
        share = list(response_tokens[start:start + q + (rank < r)])
        start += len(share)
        micro = [share[j:j + micro_batch_rows] for j in range(0, len(share), micro_batch_rows)]
        for chunk in micro:
            out += [float(world * len(micro) * max(sum(chunk), 1))] * len(chunk)
    return out


def token_mean(x: torch.Tensor, mask: torch.Tensor, denom=None) -> torch.Tensor:
    """Sum of ``x`` over valid tokens divided by the valid-token count.

    The trainer accumulates gradients over micro-batches; passing the *whole batch's*
    token count as ``denom`` makes the micro-batch losses sum to the full-batch token mean
    (so gradients do not depend on how the batch was split). An empty mask gives 0.
    ``denom`` may also be a (B,) tensor, one denominator per row of (B, T) ``x``: the sum of
    every valid token's value over its row's denominator (`verl_row_denominators`).
    """
    mask = mask.to(x.dtype)
    if isinstance(denom, torch.Tensor) and denom.dim() == 1:
        return (x * mask / denom.to(x.dtype).unsqueeze(-1)).sum()
    total = (x * mask).sum()
    if denom is None:
        denom = mask.sum().clamp(min=1.0)
    return total / denom


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float = 3.0,
    entropy: torch.Tensor | None = None,
    denom=None,
    entropy_coeff: float = 0.0,
    log_ratio_clamp: float | None = _LOG_RATIO_LIMIT,
    row_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict]:
    """PPO-clip loss over (B, T) tokens; returns (scalar loss, metrics of python floats).

    ratio = exp(lp - old); loss per token = max(-A*ratio, -A*clip(ratio, 1-low, 1+high)),
    and for A < 0 further capped at -A*dual_clip (a negative-advantage token with a huge
    ratio cannot dominate the batch). ``advantages`` is (B,) (one per row, broadcast over
    tokens) or (B, T). The loss is the token mean (``denom``, a number or one per row: see
    ``token_mean``), minus ``entropy_coeff`` times the token-mean ``entropy`` (same
    ``denom``) when the coefficient is not 0 (pass an entropy that carries gradients then).
    ``log_ratio_clamp`` (None: none) bounds lp - old. ``row_weights`` (B,), when given,
    multiply each row's token losses before the mean (loss balancing,
    drmas/algos/balance.py); the entropy term and the metrics are unweighted.

    Metrics are token means over this call's valid tokens (weight them by ``n_tokens``
    when combining micro-batches): ``clip_frac`` (pg2 > pg1), ``dual_clip_frac`` (A < 0
    and the dual cap is active), ``approx_kl`` = mean(old - lp), the k1 estimator verl logs
    as ppo_kl, ``kl_k3`` = mean(exp(d) - 1 - d) with d = lp - old (non-negative, lower
    variance), ``entropy`` when given, ``n_tokens``.
    """
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1)
    advantages = advantages.to(logprobs.dtype).expand_as(logprobs)
    mask = mask.to(logprobs.dtype)
    log_ratio = logprobs - old_logprobs
    if log_ratio_clamp is not None:
        log_ratio = log_ratio.clamp(-log_ratio_clamp, log_ratio_clamp)
    else:      # unclamped: masked positions may hold anything, keep exp() of them finite
        log_ratio = torch.where(mask > 0, log_ratio, torch.zeros_like(log_ratio))
    ratio = torch.exp(log_ratio)
    pg1 = -advantages * ratio
    pg2 = -advantages * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    clipped = torch.maximum(pg1, pg2)
    pg3 = -advantages * dual_clip
    negative = advantages < 0
    per_token = torch.where(negative, torch.minimum(clipped, pg3), clipped)
    if row_weights is not None:
        per_token = per_token * row_weights.to(per_token.dtype).unsqueeze(-1)
    loss = token_mean(per_token, mask, denom)
    if entropy_coeff:
        if entropy is None:
            raise ValueError("entropy_coeff != 0 needs the per-token entropy")
        loss = loss - entropy_coeff * token_mean(entropy.to(mask.dtype), mask, denom)

    with torch.no_grad():
        d = log_ratio.detach()
        metrics = {
            "clip_frac": token_mean((pg2 > pg1).to(mask.dtype), mask),
            "dual_clip_frac": token_mean((negative & (clipped > pg3)).to(mask.dtype), mask),
            "approx_kl": token_mean(-d, mask),
            "kl_k3": token_mean(torch.expm1(d) - d, mask),
        }
        if entropy is not None:
            metrics["entropy"] = token_mean(entropy.detach().to(mask.dtype), mask)
        metrics = {k: float(v) for k, v in metrics.items()}
        metrics["n_tokens"] = int(mask.sum().item())
    return loss, metrics


def grad_norm_and_clip(parameters: Iterable[torch.nn.Parameter], max_norm: float):
    """Total L2 grad norm before clipping, and whether it is finite.

    Grads are clipped to ``max_norm`` only when the norm is finite; otherwise they are left
    untouched and the caller must skip the optimiser step (and count the skip).
    """
    params = [p for p in parameters if p.grad is not None]
    if not params:
        return 0.0, True
    norm = torch.nn.utils.get_total_norm([p.grad for p in params], norm_type=2.0)
    value = float(norm)
    finite = math.isfinite(value)
    if finite:
        torch.nn.utils.clip_grads_with_norm_(params, max_norm, norm)
    return value, finite
