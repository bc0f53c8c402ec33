"""One decode step of a Qwen2 / Llama causal LM, computed without transformers' module calls.

A decode step of a small model is mostly Python: in a rollout of `drmas perf step`'s workload
on the default profile's three-layer model the matrix products took about a fifth of the time,
and computing the steps here instead of through transformers' forward (module calls,
output-capturing wrappers, mask preparation, config look-ups) took 23-36% off it. `logits`
computes the step with the same tensor operations, in the same order, on the same inputs as
`Qwen2ForCausalLM` / `LlamaForCausalLM` (transformers 5: embedding, rotary embedding, per
layer RMSNorm, q/k/v projections, rotary, cache update, `decode_attention`, o_proj, residual,
RMSNorm, gated MLP, residual; final RMSNorm, output layer), so its logits are the same bits
(`tests/rollout/test_decode_step.py` compares them, and whole rollouts, with the module path).

Only the single-token steps of the `hf` engine's loop come here (`decode_attention` and a
`DecodeMask`); the prefill, training and every other model go through transformers.
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

from drmas.rollout.decode import decode_attention


#: the stock classes `logits` reproduces: model class -> its decoder layer's class, by module
#: and name (a check that imports no modeling code a job does not use)
STOCK = {("transformers.models.qwen2.modeling_qwen2", "Qwen2ForCausalLM"): "Qwen2DecoderLayer",
         ("transformers.models.llama.modeling_llama", "LlamaForCausalLM"): "LlamaDecoderLayer"}


def _class(obj) -> tuple[str, str]:
    return type(obj).__module__, type(obj).__name__


def supported(model) -> bool:
    """A plain transformers Qwen2 or Llama causal LM (no adapters, no wrapper, not a
    subclass), whose layers are the stock ones `logits` reproduces, and no forward hook
    anywhere (this step calls no module's forward, so a hook would be skipped)."""
    import transformers
    from torch.nn.modules import module as torch_module

    if int(transformers.__version__.split(".")[0]) < 5:    # the forward transcribed is 5's
        return False
    layer = STOCK.get(_class(model))
    if layer is None or hasattr(model, "peft_config"):
        return False
    if torch_module._global_forward_hooks or torch_module._global_forward_pre_hooks:
        return False
    if any(m._forward_hooks or m._forward_pre_hooks for m in model.modules()):
        return False
    return all(_class(x) == (_class(model)[0], layer) for x in model.model.layers)


def _rms_norm(norm, x: torch.Tensor) -> torch.Tensor:
    """The model's RMSNorm forward, operation for operation."""
    dtype = x.dtype
    x = x.to(torch.float32)
    variance = x.pow(2).mean(-1, keepdim=True)
    x = x * torch.rsqrt(variance + norm.variance_epsilon)
    return norm.weight * x.to(dtype)


def _linear(layer, x: torch.Tensor) -> torch.Tensor:
    return F.linear(x, layer.weight, layer.bias)


def logits(model, input_ids: torch.Tensor, attention_mask: torch.Tensor,
           position_ids: torch.Tensor, cache) -> torch.Tensor:
    """Next-token logits [B, vocabulary] of one new token per row (`input_ids` [B, 1] at
    `position_ids` [B, 1]), its keys and values written into `cache` (the engine's
    `PreallocatedLayer`s), attending through `attention_mask` (a `DecodeMask` step)."""
    base = model.model
    rotate = sys.modules[type(base.layers[0].self_attn).__module__].apply_rotary_pos_emb
    hidden = base.embed_tokens(input_ids)
    cos, sin = base.rotary_emb(hidden, position_ids)
    batch = hidden.shape[0]
    for layer in base.layers[:base.config.num_hidden_layers]:
        attention, mlp = layer.self_attn, layer.mlp
        shape = (batch, 1, -1, attention.head_dim)
        residual = hidden
        x = _rms_norm(layer.input_layernorm, hidden)
        query = _linear(attention.q_proj, x).view(shape).transpose(1, 2)
        key = _linear(attention.k_proj, x).view(shape).transpose(1, 2)
        value = _linear(attention.v_proj, x).view(shape).transpose(1, 2)
        query, key = rotate(query, key, cos, sin)
        key, value = cache.layers[attention.layer_idx].update(key, value)
        out, _ = decode_attention(attention, query, key, value, attention_mask, dropout=0.0,
                                  scaling=attention.scaling)
        out = out.reshape(batch, 1, -1).contiguous()
        hidden = residual + _linear(attention.o_proj, out)
        residual = hidden
        x = _rms_norm(layer.post_attention_layernorm, hidden)
        x = _linear(mlp.down_proj, mlp.act_fn(_linear(mlp.gate_proj, x)) * _linear(mlp.up_proj, x))
        hidden = residual + x
    hidden = _rms_norm(base.norm, hidden)
    return _linear(model.lm_head, hidden)[:, -1, :]
