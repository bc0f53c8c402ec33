"""Shared-prefix log-probs: rows that begin with the same tokens run those tokens once.

In GRPO the n rollouts of a problem share their prompt, and in a multi-agent episode each
agent's later prompts in a group begin with the same system text and question. The unshared
forward (`logprobs.response_logprobs`) runs every row's whole prompt + response, so most of an
update's tokens (prompts of hundreds of tokens, responses of tens) are the same prompt tokens
computed n times, forward and backward, and again for old and reference log-probs.

Here rows are sorted by prompt and cut into groups that share a prefix (`prefix_groups`: of
all cuts of the sorted order into runs, the one that saves the most tokens, found exactly by
dynamic programming; the shared length of a run is the longest common prefix of its prompts).
One forward runs each group's prefix once, with gradients, and keeps its keys and values
(of the last layer only those: `scored.prefix_cache`, where the model is one it computes);
their rows are repeated to the group's rows (an index, so autograd sums the rows' gradients
back into the prefix), and a second forward runs every row's suffix against them: position
ids continue after the row's own prefix, and a 4-D mask lets a suffix token see its prefix
(not the padding after a shorter prefix of another group) and the suffix tokens up to itself.
Each prefix stops at least one token before its rows' first response token, so every scored
position is in the suffix, and only the suffix positions from the first scored one on go
through the output layer. Results come back in `pack`'s layout, so the losses are unchanged;
log-probs, entropies and gradients equal the unshared ones up to float rounding
(`tests/train/test_prefix.py`).
"""

from __future__ import annotations

from typing import Sequence

import torch

from drmas.train import scored
from drmas.train.logprobs import (full_attention, length_chunks, pack, response_logprobs,
                                  token_stats)

#: attention implementations whose 4-D masks this module builds (bool for sdpa, additive
#: float for eager); any other one runs the unshared forward
MASKS = ("sdpa", "eager")


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for k in range(n):
        if a[k] != b[k]:
            return k
    return n


def prefix_groups(prompts: Sequence[Sequence[int]],
                  max_rows: int | None = None) -> list[tuple[list[int], int]]:
    """(row indices, shared length) per group, every row in exactly one group of at most
    `max_rows` rows. A group's shared length is its prompts' longest common prefix, cut to
    leave at least one prompt token of every row unshared (that token's logits score the
    first response token). Of the cuts of the prompt-sorted order into runs, the one with the
    most tokens saved (sum over groups of (rows - 1) x shared length) wins; ties go to
    smaller groups, so a group never shares nothing when a row has a prompt of 2+ tokens."""
    n = len(prompts)
    order = sorted(range(n), key=lambda i: (list(prompts[i]), i))
    cap = [len(prompts[i]) - 1 for i in order]
    adjacent = [common_prefix(prompts[order[k]], prompts[order[k + 1]]) for k in range(n - 1)]
    limit = max_rows or max(n, 1)
    best, cut, shared = [0] * (n + 1), [0] * (n + 1), [0] * (n + 1)
    for i in range(1, n + 1):                 # the best cut of order[:i]; its last run order[j:i]
        p, best[i] = cap[i - 1], -1
        for j in range(i - 1, max(i - limit, 0) - 1, -1):
            if j < i - 1:
                p = min(p, adjacent[j], cap[j])
                if p <= 0:                    # longer runs save nothing
                    break
            if best[j] + (i - j - 1) * max(p, 0) > best[i]:
                best[i], cut[i], shared[i] = best[j] + (i - j - 1) * max(p, 0), j, max(p, 0)
    groups, i = [], n
    while i > 0:
        groups.append((order[cut[i]:i], shared[i]))
        i = cut[i]
    return groups[::-1]


def prefix_chunks(prompts: Sequence[Sequence[int]], lengths: Sequence[int], max_rows: int,
                  max_tokens: int) -> list[list[int]]:
    """Micro-batches of whole prefix groups (a group larger than `max_rows` rows, or than
    `max_tokens` positions, is split into pieces that each run their prefix once): at most
    `max_rows` rows and `max_tokens` padded positions each, the prefix counted once per
    group (`padded_positions`); pieces of similar suffix length together, shortest first,
    as `length_chunks` does for whole rows. A piece of one row over `max_tokens` gets a chunk
    of its own."""
    pieces = []
    for rows, p in prefix_groups(prompts, max_rows):
        rows = sorted(rows, key=lambda i: (lengths[i], i))
        piece: list[int] = []
        for i in rows:
            if piece and p + (len(piece) + 1) * (lengths[i] - p) > max_tokens:
                pieces.append((piece, p))
                piece = []
            piece.append(i)
        pieces.append((piece, p))
    pieces.sort(key=lambda g: (max(lengths[i] for i in g[0]) - g[1], g[1], g[0][0]))
    chunks: list[list[tuple[list[int], int]]] = []
    for piece in pieces:
        candidate = (chunks[-1] if chunks else []) + [piece]
        if (not chunks or sum(len(r) for r, _ in candidate) > max_rows
                or padded_positions(candidate, lengths) > max_tokens):
            chunks.append([piece])
        else:
            chunks[-1] = candidate
    return [[i for rows, _ in chunk for i in rows] for chunk in chunks]


def padded_positions(groups: Sequence[tuple[Sequence[int], int]], lengths: Sequence[int]) -> int:
    """Positions one shared forward runs for `groups` (rows, shared length): the prefixes
    padded to the longest, then every row's suffix padded to the longest."""
    if not groups:
        return 0
    rows = [i for r, _ in groups for i in r]
    return (len(groups) * max(p for _, p in groups)
            + len(rows) * max(lengths[i] - p for r, p in groups for i in r))


def shared_tokens(prompts: Sequence[Sequence[int]], lengths: Sequence[int],
                  chunks: Sequence[Sequence[int]]) -> int:
    """Tokens (no padding) the shared forward runs over `chunks` of rows: each group's prefix
    once, every row's suffix (the unshared forward runs sum(lengths))."""
    total = 0
    for chunk in chunks:
        for rows, p in prefix_groups([prompts[i] for i in chunk]):
            total += p + sum(lengths[chunk[k]] - p for k in rows)
    return total


def update_tokens(prompts: Sequence[Sequence[int]], lengths: Sequence[int], max_rows: int,
                  max_tokens: int) -> dict:
    """Tokens and padded positions one pass over the rows runs, unshared (`length_chunks`,
    every row whole) and shared (`prefix_chunks`, each prefix once): what sharing saves."""
    plain = length_chunks(lengths, max_rows, max_tokens)
    shared = prefix_chunks(prompts, lengths, max_rows, max_tokens)
    padded = 0
    for chunk in shared:
        groups = prefix_groups([prompts[i] for i in chunk])
        padded += padded_positions([([chunk[k] for k in g], p) for g, p in groups], lengths)
    return {"unshared": {"tokens": sum(lengths),
                         "padded": sum(len(c) * max(lengths[i] for i in c) for c in plain)},
            "shared": {"tokens": shared_tokens(prompts, lengths, shared), "padded": padded}}


def row_chunks(lengths: Sequence[int], max_rows: int, max_tokens: int,
               prompts: Sequence[Sequence[int]] | None = None) -> list[list[int]]:
    """Micro-batches of rows: given their `prompts`, whole prefix groups with each prefix
    counted once (`prefix_chunks`, for `rows_logprobs(shared=True)`); else rows of similar
    length (`length_chunks`)."""
    if prompts is None:
        return length_chunks(lengths, max_rows, max_tokens)
    return prefix_chunks(prompts, lengths, max_rows, max_tokens)


def rows_logprobs(model, prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[int]],
                  pad_id: int, temperature: float = 1.0, with_entropy: bool = False,
                  entropy_grad: bool = False, *, shared: bool, device=None):
    """(logprobs, entropy or None, response mask) of one micro-batch of rows (prompt,
    response) in `pack` + `response_logprobs`'s layout, on `device` (the model's by default):
    by the shared-prefix forward when `shared` (`shared_response_logprobs`), else by the
    unshared one. The one entry of the worker's and the reference policy's micro-batches."""
    if shared:
        return shared_response_logprobs(model, prompts, responses, pad_id, temperature,
                                        with_entropy, entropy_grad)
    device = device if device is not None else next(model.parameters()).device
    ids, attn, resp = (t.to(device) for t in pack(prompts, responses, pad_id))
    lp, entropy = response_logprobs(model, ids, attn, temperature, with_entropy, resp,
                                    entropy_grad)
    return lp, entropy, resp


def supported(model) -> bool:
    """A model whose attention takes this module's masks and whose layers all attend to the
    whole sequence (a sliding-window layer would need its own mask)."""
    config = model.config.get_text_config(decoder=True)
    return getattr(config, "_attn_implementation", None) in MASKS and full_attention(model)


def shared_response_logprobs(model, prompts: Sequence[Sequence[int]],
                             responses: Sequence[Sequence[int]], pad_id: int,
                             temperature: float = 1.0, with_entropy: bool = False,
                             entropy_grad: bool = False):
    """(logprobs, entropy or None, response mask) of the rows (prompt, response), laid out as
    `pack` + `response_logprobs` lay them out ((B, W-1), on the model's device), computed with
    each group's shared prefix run once. Rows a prefix cannot be shared for (a one-token
    prompt) or a model `supported` rejects run the unshared forward."""
    device = next(model.parameters()).device
    groups = prefix_groups(prompts)
    if not supported(model) or any(p < 1 for _, p in groups):
        return rows_logprobs(model, prompts, responses, pad_id, temperature, with_entropy,
                             entropy_grad, shared=False, device=device)
    rows = len(prompts)
    owner, shared = [0] * rows, [0] * rows
    for g, (members, p) in enumerate(groups):
        for b in members:
            owner[b], shared[b] = g, p
    width_p = max(p for _, p in groups)
    pre_ids = torch.full((len(groups), width_p), pad_id, dtype=torch.long)
    pre_attn = torch.zeros_like(pre_ids)
    for g, (members, p) in enumerate(groups):
        pre_ids[g, :p] = torch.tensor(list(prompts[members[0]][:p]))
        pre_attn[g, :p] = 1
    pre_ids, pre_attn = pre_ids.to(device), pre_attn.to(device)
    if scored.supported(model):                # the last layer's keys and values only
        cache = scored.prefix_cache(model, pre_ids, pre_attn)
    else:
        cache = model(input_ids=pre_ids, attention_mask=pre_attn, use_cache=True,
                      logits_to_keep=1).past_key_values
    index = torch.tensor(owner, device=device)
    for layer in cache.layers:                 # each row reads its group's prefix
        layer.batch_select_indices(index)

    suffixes = [(list(p) + list(r))[s:] for p, r, s in zip(prompts, responses, shared)]
    width_s = max(len(x) for x in suffixes)
    ids = torch.full((rows, width_s), pad_id, dtype=torch.long)
    valid = torch.zeros((rows, width_s), dtype=torch.bool)
    for b, x in enumerate(suffixes):
        ids[b, :len(x)] = torch.tensor(x)
        valid[b, :len(x)] = True
    offset = torch.tensor(shared)
    positions = offset[:, None] + torch.arange(width_s)
    sees_prefix = (torch.arange(width_p)[None, :] < offset[:, None])[:, None, :]
    causal = torch.ones(width_s, width_s, dtype=torch.bool).tril()[None] & valid[:, None, :]
    allowed = torch.cat([sees_prefix.expand(rows, width_s, width_p), causal], -1)[:, None]
    mask = allowed.to(device)
    if model.config.get_text_config(decoder=True)._attn_implementation == "eager":
        mask = torch.zeros(mask.shape, device=device).masked_fill(~mask, torch.finfo(torch.float32).min)
    start = min(len(p) - 1 - s for p, s in zip(prompts, shared))   # first scored suffix position
    ids = ids.to(device)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions.to(device),
                   past_key_values=cache, use_cache=True,
                   logits_to_keep=width_s - start).logits[:, :-1]
    lp, entropy = token_stats(logits, ids[:, start + 1:], temperature, with_entropy, entropy_grad)

    _, _, resp = pack(prompts, responses, pad_id)
    width = resp.shape[1]
    columns = (offset[:, None] + start + torch.arange(lp.shape[1])).to(device)

    def place(values):                         # suffix column t -> pack column shared + t
        if values is None:
            return None
        out = values.new_zeros((rows, width + width_s)).scatter(1, columns, values)
        return out[:, :width]

    return place(lp), place(entropy), resp.to(device)
