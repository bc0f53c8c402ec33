"""Response log-probs whose last decoder layer runs at the scored positions only.

A supervised warm start scores a row's response tokens, a tenth of its tokens on the default
profile's search demonstrations (prompts of ~160 tokens, replies of ~17), yet the plain
forward (`logprobs.response_logprobs`) runs every layer at every position. In the last layer a
prompt position is needed for its keys and values alone: its query, attention output, o_proj
and MLP reach no loss. Here the layers before the last run as the model's own forward runs
them (the same mask, position ids and rotary embeddings), and the last one projects keys and
values at every position but gathers each row's scored positions (the token before each
response token) for everything else, attending to the row's keys up to that position.

The logprobs equal the plain forward's (the first layers are the same computation), the
gradients up to float rounding (the last layer's weight gradients sum over fewer rows);
`tests/train/test_scored.py` compares both. Measured on the default profile's tiny models
(one thread, float32, AVX2 EPYC): an SFT step 23% shorter on search demonstrations and 20%
on math ones. The computation is the Qwen2 / Llama decoder layer's (pre-norm attention with
rotary embeddings, then pre-norm MLP); `supported` says when a model is one.

The RL update's shared-prefix forward (`prefix.shared_response_logprobs`) meets the same
waste in its prefix pass: a prefix is read only through its keys and values, so
`prefix_cache` stops its last layer after the key and value projections.
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

from drmas.train.logprobs import full_attention, token_stats

#: model types whose decoder layers are the computation `scored_logprobs` reproduces
MODEL_TYPES = ("qwen2", "llama")


def supported(model) -> bool:
    """A Qwen2 / Llama causal LM on SDPA attention, every layer attending to the whole
    sequence, no attention dropout, not wrapped (LoRA adapters; FSDP2, whose hooks gather a
    root module's weights only when the whole model runs): else the plain forward."""
    from torch.distributed.fsdp import FSDPModule

    config = getattr(model, "config", None)
    if config is None or getattr(config, "model_type", None) not in MODEL_TYPES:
        return False
    dropout = float(getattr(config, "attention_dropout", 0.0) or 0.0)
    return (config._attn_implementation == "sdpa" and full_attention(model) and not dropout
            and not hasattr(model, "peft_config") and not isinstance(model, FSDPModule)
            and hasattr(model, "lm_head"))


def scored_positions(resp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(positions, valid) of each row's scored columns in `pack`'s response mask: positions
    [B, R] (R = the longest row's count; a row with fewer repeats its last one), valid [B, R]."""
    counts = resp.sum(1).long()
    width = max(int(counts.max()), 1)
    first = resp.argmax(1)                   # the first scored column (prompt length - 1)
    steps = torch.arange(width, device=resp.device)
    valid = steps[None] < counts[:, None]
    last = (first + counts - 1).clamp(min=0)
    positions = torch.minimum(first[:, None] + steps[None], last[:, None])
    return positions, valid


def scored_logprobs(model, ids: torch.Tensor, attn: torch.Tensor, resp: torch.Tensor,
                    temperature: float = 1.0) -> torch.Tensor:
    """Per-position logprobs of the next token in `pack`'s layout (B, W-1), 0 where `resp` is
    0: the same values `response_logprobs(model, ids, attn, temperature, resp=resp)` gives."""
    base = model.model
    batch, width = ids.shape
    positions, valid = scored_positions(resp.to(ids.device))
    hidden, rotary = _all_but_last_layer(model, ids, attn)
    hidden = _last_layer(base.layers[base.config.num_hidden_layers - 1], hidden, attn, rotary,
                         positions)
    logprobs, _ = token_stats(model.lm_head(base.norm(hidden)), ids.gather(1, positions + 1),
                              temperature, with_entropy=False, entropy_grad=False)
    out = torch.zeros((batch, width - 1), dtype=logprobs.dtype, device=ids.device)
    return out.scatter_add(1, positions, logprobs * valid)


def prefix_cache(model, ids: torch.Tensor, attn: torch.Tensor):
    """The keys and values of every layer at every position of `ids` (a `DynamicCache`), as
    `model(ids, attention_mask=attn, use_cache=True).past_key_values` holds them, for
    `prefix.shared_response_logprobs`: a shared prefix is read by its rows' suffixes through
    this cache alone, so its last layer needs keys and values, not queries, attention, o_proj
    or MLP. The same values as the model's forward (the same operations on the same inputs)."""
    from transformers import DynamicCache

    base = model.model
    cache = DynamicCache(config=base.config)
    hidden, rotary = _all_but_last_layer(model, ids, attn, cache)
    last = base.layers[base.config.num_hidden_layers - 1]
    key, value = _keys_values(last.self_attn, last.input_layernorm(hidden), *rotary)
    cache.update(key, value, last.self_attn.layer_idx)
    return cache


def _all_but_last_layer(model, ids: torch.Tensor, attn: torch.Tensor, cache=None):
    """(hidden states after every decoder layer but the last, rotary (cos, sin)) as the
    model's own forward computes them: the same mask, position ids and rotary embeddings;
    each layer's keys and values go into `cache` when one is given."""
    from transformers.masking_utils import create_causal_mask

    base = model.model
    hidden = base.embed_tokens(ids)
    position_ids = torch.arange(ids.shape[1], device=ids.device)[None]
    mask = create_causal_mask(config=base.config, inputs_embeds=hidden, attention_mask=attn,
                              past_key_values=cache, position_ids=position_ids)
    rotary = base.rotary_emb(hidden, position_ids)
    for layer in base.layers[:base.config.num_hidden_layers - 1]:
        hidden = layer(hidden, attention_mask=mask, position_embeddings=rotary,
                       position_ids=position_ids, past_key_values=cache,
                       use_cache=cache is not None)
    return hidden, rotary


def _rotated(attention, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """The model's `apply_rotary_pos_emb` on one tensor [B, heads, L, head_dim]."""
    rotate_half = sys.modules[type(attention).__module__].rotate_half
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return (x * cos) + (rotate_half(x) * sin)


def _keys_values(attention, normed: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """Rotated keys and values [B, kv_heads, W, head_dim] of `attention` at every position."""
    batch, width, _ = normed.shape
    head = attention.head_dim
    key = attention.k_proj(normed).view(batch, width, -1, head).transpose(1, 2)
    value = attention.v_proj(normed).view(batch, width, -1, head).transpose(1, 2)
    return _rotated(attention, key, cos, sin), value


def _last_layer(layer, hidden: torch.Tensor, attn: torch.Tensor, rotary, positions: torch.Tensor):
    """The decoder layer's output [B, R, D] at `positions` [B, R]: keys and values from every
    position, queries and the rest from the scored ones."""
    attention = layer.self_attn
    batch, width, dim = hidden.shape
    rows = positions.shape[1]
    normed = layer.input_layernorm(hidden)
    pick = positions[..., None]
    query_in = normed.gather(1, pick.expand(batch, rows, dim))
    query = attention.q_proj(query_in).view(batch, rows, -1, attention.head_dim).transpose(1, 2)
    cos, sin = rotary
    key, value = _keys_values(attention, normed, cos, sin)
    picked = pick.expand(batch, rows, cos.shape[-1])
    query = _rotated(attention, query, cos.expand(batch, -1, -1).gather(1, picked),
                     sin.expand(batch, -1, -1).gather(1, picked))
    sees = ((torch.arange(width, device=hidden.device)[None, None] <= positions[..., None])
            & attn.bool()[:, None])                                     # [B, R, W]
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=sees[:, None],
                                         scale=attention.scaling,
                                         enable_gqa=query.shape[1] != key.shape[1])
    out = attention.o_proj(out.transpose(1, 2).reshape(batch, rows, -1))
    residual = hidden.gather(1, pick.expand(batch, rows, dim)) + out
    return residual + layer.mlp(layer.post_attention_layernorm(residual))
