"""Teacher-forced log-probabilities of responses: what the PPO loss differentiates.

Rows are right-padded `prompt + response` sequences; the logprob of response token i comes
from the logits at the position before it, divided by the sampling temperature so it is the
same quantity the rollout engine reports.
"""

from __future__ import annotations

from typing import Sequence

import torch


def pack(prompts: Sequence[list[int]], responses: Sequence[list[int]], pad_id: int):
    """Right-padded (ids, attention_mask, response_mask) for a batch of rows.

    response_mask[b, t] is 1 where ids[b, t + 1] is a response token, aligned with the
    shifted logits so `logprobs[:, t]` scores token t + 1.
    """
    lengths = [len(p) + len(r) for p, r in zip(prompts, responses)]
    width = max(lengths)
    ids = torch.full((len(lengths), width), pad_id, dtype=torch.long)
    attn = torch.zeros_like(ids)
    resp = torch.zeros((len(lengths), width - 1), dtype=torch.float32)
    for b, (p, r) in enumerate(zip(prompts, responses)):
        ids[b, :lengths[b]] = torch.tensor(list(p) + list(r))
        attn[b, :lengths[b]] = 1
        resp[b, len(p) - 1:lengths[b] - 1] = 1.0
    return ids, attn, resp


def full_attention(model) -> bool:
    """Every decoder layer of `model` attends to the whole sequence (a sliding-window layer
    needs a mask of its own, which the shared-prefix and scored forwards do not build)."""
    config = model.config.get_text_config(decoder=True)
    return set(getattr(config, "layer_types", None) or ["full_attention"]) == {"full_attention"}


def length_chunks(lengths: Sequence[int], max_rows: int, max_tokens: int) -> list[list[int]]:
    """Row indices grouped into micro-batches of similar length, shortest first.

    Every micro-batch is padded to its longest row, so mixing a 40-token row with a
    400-token one wastes 360 positions; sorting first and cutting when a chunk would exceed
    `max_rows` rows or `max_tokens` padded positions cut the padded tokens of a search
    warm-start batch by about 2x. A row longer than `max_tokens` gets a chunk of its own.
    """
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    chunks: list[list[int]] = []
    for i in order:
        if not chunks or len(chunks[-1]) >= max_rows or (len(chunks[-1]) + 1) * lengths[i] > max_tokens:
            chunks.append([])
        chunks[-1].append(i)
    return chunks


def response_logprobs(model, ids: torch.Tensor, attn: torch.Tensor, temperature: float = 1.0,
                      with_entropy: bool = False, resp: torch.Tensor | None = None,
                      entropy_grad: bool = False):
    """Per-position logprobs of the next token (B, W-1), and its entropy if asked: with a
    graph when `entropy_grad` (an entropy bonus in the loss differentiates it), else without
    (a logged metric; its graph would hold a second vocabulary-sized tensor per position).

    Given `resp` (pack's response mask), only the positions from the batch's first response
    token on go through the output layer (transformers' `logits_to_keep`, as TRL does); the
    columns before it hold 0. No loss reads a prompt position, and with a 49k-152k-token
    vocabulary the prompt's logits are most of the memory and much of the time of an update
    on long prompts (a search agent's retrieved passages)."""
    start = int(resp.any(0).nonzero()[0]) if resp is not None and bool(resp.any()) else 0
    keep = {"logits_to_keep": ids.shape[1] - start} if start else {}
    logits = model(input_ids=ids, attention_mask=attn, use_cache=False, **keep).logits[:, :-1]
    logprobs, entropy = token_stats(logits, ids[:, start + 1:], temperature, with_entropy,
                                    entropy_grad)
    return _pad_left(logprobs, start), (_pad_left(entropy, start) if with_entropy else None)


def token_stats(logits: torch.Tensor, targets: torch.Tensor, temperature: float,
                with_entropy: bool, entropy_grad: bool):
    """Logprobs of `targets` under softmax(logits / T), and the entropy if asked (a graph
    only when `entropy_grad`): the one place both forwards (this module's and the
    shared-prefix one, drmas/train/prefix.py) turn logits into what the loss reads."""
    logits = logits.float() / max(temperature, 1e-6)
    logp_all = torch.log_softmax(logits, dim=-1)
    logprobs = logp_all.gather(-1, targets[..., None]).squeeze(-1)
    entropy = None
    if with_entropy:
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logprobs, entropy


def _pad_left(values: torch.Tensor, columns: int) -> torch.Tensor:
    return torch.nn.functional.pad(values, (columns, 0)) if columns else values


