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
                      with_entropy: bool = False):
    """Per-position logprobs of the next token (B, W-1), and its entropy if asked."""
    logits = model(input_ids=ids, attention_mask=attn, use_cache=False).logits[:, :-1].float()
    logits = logits / max(temperature, 1e-6)
    logp_all = torch.log_softmax(logits, dim=-1)
    logprobs = logp_all.gather(-1, ids[:, 1:, None]).squeeze(-1)
    entropy = None
    if with_entropy:                 # a logged metric, never differentiated: no graph for it
        with torch.no_grad():
            entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logprobs, entropy


def unpad_response(values: torch.Tensor, resp_mask: torch.Tensor) -> list[list[float]]:
    """Per-row lists of the response positions of a (B, W-1) tensor."""
    return [values[b][resp_mask[b] > 0].tolist() for b in range(values.shape[0])]
