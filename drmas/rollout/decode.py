"""What makes the transformers decode loop fast on a CPU: a KV cache that does not copy
itself, attention for one new token that does not copy the cache either, and one prefill per
distinct prompt.

Measured on SmolLM2-135M (bf16, 2 cores, 64 rows, 800 cached tokens), one decode step took
about 1.3 s with transformers' defaults, almost all of it moving the KV cache through memory:
- `DynamicCache` grows by `torch.cat`, so every new token copies the whole cache;
- the `sdpa` path, given a padding mask, repeats grouped-query keys and values to the number
  of query heads (3x the cache for SmolLM2) before calling torch's kernel, whose CPU
  flash-attention loop is slow for a single query row.
`PreallocatedLayer` writes each new key / value into storage sized once for prompt + response,
and `decode_attention` computes a single query row's attention by grouped matmuls over the
part of that storage written so far (a view, not a copy; `DecodeMask` is as wide as that part:
short replies leave most response slots empty, and reading only the written ones cut a small
model's sampling by 13-20%). Prompts longer than one token go through transformers' own `sdpa`
function unchanged, so prefill and training compute exactly what they did.

Rows that have finished (EOS) leave the batch, their cache rows with them
(`PreallocatedLayer.batch_select_indices`, `DecodeMask.select`; when, in `hf.worth_dropping`).

Sampling n completions of one prompt (a GRPO group, an avg@16 evaluation) repeats the same
prompt n times; `distinct_prompts` lets the engine prefill each distinct prompt once and copy
its cache rows.
"""

from __future__ import annotations

import contextlib
import math

import torch
from transformers import AttentionInterface
from transformers.cache_utils import Cache, DynamicLayer
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from drmas.errors import ConfigError

NAME = "drmas_decode"


class PreallocatedLayer(DynamicLayer):
    """A cache layer over storage allocated once for `capacity` positions. `update` writes the
    new keys / values in place and returns the whole storage, so that attention reads one
    contiguous tensor (a view of the filled part would be copied by every matmul); the
    positions not yet written are masked by causality (`get_mask_sizes` reports the whole
    capacity, and the engine's 2-D mask covers it)."""

    def __init__(self, capacity: int):
        super().__init__()
        self.capacity, self.length = capacity, 0

    def lazy_initialization(self, key_states, value_states) -> None:
        self.dtype, self.device = key_states.dtype, key_states.device
        shape = (*key_states.shape[:-2], self.capacity, key_states.shape[-1])
        self.keys = key_states.new_zeros(shape)
        self.values = value_states.new_zeros((*shape[:-1], value_states.shape[-1]))
        self.length = 0
        self.is_initialized = True

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        end = self.length + key_states.shape[-2]
        if end > self.capacity:
            raise RuntimeError(f"rollout cache full: {end} positions, room for {self.capacity}")
        self.keys[..., self.length:end, :] = key_states
        self.values[..., self.length:end, :] = value_states
        self.length = end
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length if self.is_initialized else 0

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.capacity, 0

    def batch_repeat_interleave(self, repeats) -> None:
        """Row i becomes repeats[i] consecutive rows (`repeats`: an int or a tensor)."""
        if self.is_initialized:
            self.keys = self.keys.repeat_interleave(repeats, dim=0)
            self.values = self.values.repeat_interleave(repeats, dim=0)

    def reset(self) -> None:
        self.length = 0
        super().reset()

    def crop(self, tokens_to_remove: int) -> None:
        raise NotImplementedError("the rollout cache is never cropped")

    def batch_select_indices(self, indices) -> None:
        """Keep rows `indices` (finished rows leave the decode batch): they move to the front
        of the same storage, copying only the positions written so far (the rest are zeros in
        every row), and the cache becomes a view of those rows, contiguous as before."""
        if self.is_initialized:
            rows, end = len(indices), self.length
            self.keys[:rows, :, :end] = self.keys[indices, :, :end]
            self.values[:rows, :, :end] = self.values[indices, :, :end]
            self.keys, self.values = self.keys[:rows], self.values[:rows]


def preallocated_cache(model, capacity: int) -> Cache:
    """A cache for `model` whose layers hold `capacity` positions (prompt width + new tokens);
    the 2-D attention mask given with it must cover all `capacity` positions. The layers exist
    from the start, so that the prefill's mask is sized to the capacity too."""
    config = model.config.get_text_config(decoder=True)
    kinds = set(getattr(config, "layer_types", None) or ["full_attention"])
    if kinds != {"full_attention"}:
        raise ConfigError(f"the hf engine's cache holds full-attention layers only; this model "
                          f"has {', '.join(sorted(kinds - {'full_attention'}))} layers: use "
                          f"engine: vllm for it")
    return Cache(layers=[PreallocatedLayer(capacity) for _ in range(config.num_hidden_layers)])


def decode_attention(module, query, key, value, attention_mask, dropout: float = 0.0,
                     scaling: float | None = None, **kwargs):
    """Attention of a single query row against the cached keys / values, without repeating
    grouped keys (q: [B, H, 1, d]; k, v: [B, Hkv, L, d]; mask: bool [B, 1, 1, L] or None).
    Longer queries (prefill, training) go to transformers' `sdpa` function unchanged."""
    batch, heads, q_len, dim = query.shape
    if q_len != 1 or dropout or kwargs.get("position_bias") is not None:
        return sdpa_attention_forward(module, query, key, value, attention_mask,
                                      dropout=dropout, scaling=scaling, **kwargs)
    if attention_mask is not None and attention_mask.shape[-1] < key.shape[2]:
        # a DecodeMask as wide as the slots written so far: the rest is never attended to
        key, value = key[:, :, :attention_mask.shape[-1]], value[:, :, :attention_mask.shape[-1]]
    kv_heads, length = key.shape[1], key.shape[2]
    scale = scaling if scaling is not None else 1.0 / math.sqrt(dim)
    q = query.reshape(batch, kv_heads, heads // kv_heads, dim)
    scores = torch.matmul(q, key.transpose(-1, -2)).float() * scale      # [B, Hkv, g, L]
    if attention_mask is not None:
        mask = attention_mask.reshape(batch, 1, 1, length)
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))
        else:
            scores = scores + mask.float()
    probs = torch.softmax(scores, dim=-1).to(value.dtype)
    out = torch.matmul(probs, value)                                      # [B, Hkv, g, d]
    return out.reshape(batch, heads, 1, dim).transpose(1, 2), None


AttentionInterface.register(NAME, decode_attention)
AttentionMaskInterface.register(NAME, sdpa_mask)


@contextlib.contextmanager
def decoding(model):
    """The model attends through `decode_attention` inside the block (sdpa models only: any
    other implementation, e.g. eager or flash, is left as it is). Yields whether it does."""
    config = model.config
    before = getattr(config, "_attn_implementation", None)
    if before != "sdpa":
        yield False
        return
    config._attn_implementation = NAME
    try:
        yield True
    finally:
        config._attn_implementation = before


class DecodeMask:
    """The 4-D boolean mask of the single-token decode steps: a row's prompt tokens (left
    padding off) and the response slots written so far, [rows, 1, 1, slots written]: as wide
    as the part of the cache written, so that `decode_attention` reads that part only (short
    replies leave most response slots empty to the end).

    Built here rather than by transformers from the 2-D mask: for a single query, transformers
    drops the mask altogether when the 2-D mask holds no zero (every prompt of the batch the
    same length), and `decode_attention` would then attend to the cache slots not written yet
    (zeros). A 4-D mask is passed through as it is, which also spares the mask's construction
    at every step."""

    def __init__(self, prompt_mask: torch.Tensor, new_tokens: int):
        rows, self.width = prompt_mask.shape
        self.mask = torch.cat([prompt_mask.bool(), prompt_mask.new_zeros(
            (rows, new_tokens), dtype=torch.bool)], 1)[:, None, None, :]

    def select(self, indices: torch.Tensor) -> None:
        """Keep rows `indices`, as the cache does (`PreallocatedLayer.batch_select_indices`)."""
        self.mask = self.mask[indices]

    def at(self, step: int) -> torch.Tensor:
        """The mask of decode step `step` >= 1, whose input token goes to slot width + step - 1."""
        end = self.width + step
        self.mask[..., end - 1] = True
        return self.mask[..., :end]


def distinct_prompts(prompts) -> tuple[list[list[int]], list[int]]:
    """(the distinct prompts in first-seen order, the distinct index of each prompt), for
    prompts that come in consecutive runs (n samples of one problem); a prompt seen again
    after another one counts as new, so that rows keep their order."""
    unique: list[list[int]] = []
    index: list[int] = []
    for p in prompts:
        if not unique or list(p) != unique[-1]:
            unique.append(list(p))
        index.append(len(unique) - 1)
    return unique, index
