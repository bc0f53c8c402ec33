"""The decode step without transformers' module calls (`drmas/rollout/decode_step.py`) against
the model's own forward: the same logits, bit for bit, and the same rollouts, for Qwen2 and
Llama shapes (grouped-query attention, biases, tied and untied output layers), in float32 and
bfloat16."""

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from drmas.rollout import decode_step
from drmas.rollout.base import Sampling
from drmas.rollout.decode import DecodeMask, PreallocatedLayer, decoding, preallocated_cache
from drmas.rollout.hf import HFEngine

EOS = 1


class _Tokenizer:
    eos_token_id, pad_token_id = EOS, 0

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(map(str, ids))


def _qwen2(vocab=97):
    return Qwen2ForCausalLM(Qwen2Config(
        vocab_size=vocab, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True,
        attn_implementation="sdpa"))


def _llama(vocab=89):
    return LlamaForCausalLM(LlamaConfig(
        vocab_size=vocab, hidden_size=96, intermediate_size=160, num_hidden_layers=3,
        num_attention_heads=3, num_key_value_heads=1, tie_word_embeddings=False,
        mlp_bias=True, attention_bias=True, rms_norm_eps=1e-5, attn_implementation="sdpa"))


MODELS = {"qwen2": _qwen2, "llama": _llama}


def _model(name: str, dtype: torch.dtype, **shape):
    torch.manual_seed(0)
    model = MODELS[name](**shape).to(dtype).eval()
    with torch.no_grad():                        # biases away from zero, so they count
        for n, p in model.named_parameters():
            if n.endswith("bias"):
                p.normal_(0, 0.5)
    return model


def _prefilled(model, prompts, new_tokens):
    """A prefilled cache, its DecodeMask, next positions and the prefill's last logits."""
    width = max(len(p) for p in prompts)
    ids = torch.zeros((len(prompts), width), dtype=torch.long)
    prompt_mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):] = torch.tensor(p)
        prompt_mask[i, width - len(p):] = 1
    positions = (prompt_mask.cumsum(-1) - 1).clamp(min=0)
    mask = torch.cat([prompt_mask, prompt_mask.new_ones((len(prompts), new_tokens))], 1)
    past = preallocated_cache(model, width + new_tokens)
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=past,
                use_cache=True, logits_to_keep=1)
    return past, DecodeMask(mask[:, :width], new_tokens), positions[:, -1:] + 1, out.logits[:, -1]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_step_logits_are_the_forwards_bits(name, dtype):
    model = _model(name, dtype)
    prompts = [[5, 6, 7, 8, 9], [10, 11], [12, 13, 14]]
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad(), decoding(model) as ours:
        assert ours and decode_step.supported(model)
        mine = _prefilled(model, prompts, 6)
        theirs = _prefilled(model, prompts, 6)
        assert torch.equal(mine[3], theirs[3])
        positions = mine[2]
        for step in range(1, 6):
            tokens = torch.randint(2, 80, (len(prompts), 1), generator=gen)
            got = decode_step.logits(model, tokens, mine[1].at(step), positions, mine[0])
            want = model(input_ids=tokens, attention_mask=theirs[1].at(step), position_ids=positions,
                         past_key_values=theirs[0], use_cache=True, logits_to_keep=1).logits[:, -1]
            assert got.dtype == want.dtype and torch.equal(got, want), step
            for a, b in zip(mine[0].layers, theirs[0].layers):
                assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)
            positions = positions + 1


@pytest.mark.parametrize("top_p", [1.0, 0.9])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_rollouts_are_those_of_the_module_path(name, dtype, top_p, monkeypatch):
    """Whole rollouts (finished rows leaving the batch, top-p, repeated prompts) sample the
    same tokens with the same logprobs with and without the direct step. An 11-token
    vocabulary makes EOS likely at every step, so rows finish at many different steps."""
    model = _model(name, dtype, vocab=11)
    prompts = [[5, 6, 7]] * 4 + [[8, 9, 10, 2, 3]] * 4 + [[4]] * 2 + [[2, 3], [9, 8, 7, 6]]
    sampling = Sampling(temperature=1.0, top_p=top_p, max_tokens=12)
    calls, dropped = [], []
    real, select = decode_step.logits, PreallocatedLayer.batch_select_indices

    def counted(*args, **kw):
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(decode_step, "logits", counted)
    monkeypatch.setattr(PreallocatedLayer, "batch_select_indices",
                        lambda self, i: (dropped.append(len(i)), select(self, i)))
    direct = HFEngine(model, _Tokenizer()).generate(prompts, sampling, seed=7)
    assert calls and (dropped or top_p < 1)      # the direct step ran, on fewer rows too
    monkeypatch.setattr(decode_step, "supported", lambda model: False)
    modules = HFEngine(model, _Tokenizer()).generate(prompts, sampling, seed=7)
    assert [g.response_ids for g in direct] == [g.response_ids for g in modules]
    assert [g.logprobs for g in direct] == [g.logprobs for g in modules]
    assert any(len(g.response_ids) > 1 for g in direct)


def test_only_stock_qwen2_and_llama_take_the_direct_step():
    class Custom(Qwen2ForCausalLM):
        pass

    config = Qwen2Config(vocab_size=17, hidden_size=32, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1)
    assert decode_step.supported(Qwen2ForCausalLM(config))
    assert not decode_step.supported(Custom(config))
    assert not decode_step.supported(torch.nn.Linear(2, 2))
    import transformers

    with pytest.MonkeyPatch.context() as patch:  # a transformers whose forward was not read
        patch.setattr(transformers, "__version__", "4.57.0")
        assert not decode_step.supported(Qwen2ForCausalLM(config))
    hooked = Qwen2ForCausalLM(config)            # a hook the direct step would skip
    hooked.lm_head.register_forward_hook(lambda module, args, out: out + 1)
    assert not decode_step.supported(hooked)
