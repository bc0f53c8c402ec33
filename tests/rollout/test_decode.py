"""The fast decode path of the transformers engine (drmas/rollout/decode.py) against
independent references: transformers' own `generate` (DynamicCache + sdpa) for whole
generations, and attention written out with repeated keys for single steps."""

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from drmas.rollout.base import Sampling
from drmas.rollout.decode import (NAME, PreallocatedLayer, decode_attention, decoding,
                                  distinct_prompts, preallocated_cache)
from drmas.rollout.hf import HFEngine


class _Tok:
    """The two ids the engine reads, and a decode it calls (text is not compared here)."""
    eos_token_id, pad_token_id = 1, 0

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(map(str, ids))


def _gqa_model(seed=0, heads=4, kv_heads=2):
    """A random Qwen2 with grouped-query attention (2 query heads per key/value head)."""
    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=heads, num_key_value_heads=kv_heads,
                         max_position_embeddings=256, tie_word_embeddings=True,
                         attn_implementation="sdpa")
    return Qwen2ForCausalLM(config).eval()


def _prompts(seed=0):
    g = torch.Generator().manual_seed(seed)
    lengths = [5, 9, 9, 3, 12, 7, 7, 7, 10, 4, 6, 11, 8, 8, 2, 9, 5, 13, 6, 10]
    prompts = [torch.randint(2, 97, (n,), generator=g).tolist() for n in lengths]
    return prompts + [prompts[3]] * 3 + [prompts[0]] * 2          # runs of one prompt too


def _reference_greedy(model, prompts, new_tokens):
    """transformers' generate, one prompt at a time (no padding at all), greedy."""
    out = []
    for p in prompts:
        ids = torch.tensor([p])
        seq = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                             do_sample=False, eos_token_id=None, pad_token_id=0)
        out.append(seq[0, len(p):].tolist())
    return out


def test_greedy_generation_equals_transformers_generate_token_for_token():
    model = _gqa_model()
    prompts = _prompts()
    engine = HFEngine(model, _Tok(), batch_size=16)           # two batches, ragged, repeats
    engine.eos_id = -1                                        # never stop: every token compared
    gens = engine.generate(prompts, Sampling(0.0, 1.0, 12), seed=0)
    reference = _reference_greedy(model, prompts, 12)
    assert len(prompts) >= 20
    assert [g.response_ids for g in gens] == reference
    assert model.config._attn_implementation == "sdpa"        # restored after generating


def test_engine_logprobs_equal_a_teacher_forced_forward_with_gqa():
    model = _gqa_model(seed=1)
    prompts = _prompts(seed=1)
    engine = HFEngine(model, _Tok(), batch_size=32)
    engine.eos_id = -1
    gens = engine.generate(prompts, Sampling(0.7, 0.9, 10), seed=5)
    for g in gens:
        ids = torch.tensor([g.prompt_ids + g.response_ids])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, len(g.prompt_ids) - 1:-1].float() / 0.7
        ref = torch.log_softmax(logits, -1).gather(-1, torch.tensor(g.response_ids)[:, None])
        assert torch.allclose(torch.tensor(g.logprobs), ref[:, 0], atol=1e-4)


def test_prompts_of_one_length_attend_to_written_slots_only():
    """A batch without any left padding (every prompt of one length): the decode steps still
    mask the response slots not written yet. transformers drops a single query's mask when
    the 2-D mask holds no zero; attending to the zero slots put the engine's logprobs 0.58 off
    the trainer's on the default small math model."""
    model = _gqa_model(seed=3)
    g = torch.Generator().manual_seed(3)
    prompts = [torch.randint(2, 97, (7,), generator=g).tolist() for _ in range(5)]
    prompts += [prompts[0]] * 2                                 # a repeated one too
    engine = HFEngine(model, _Tok(), batch_size=16)
    engine.eos_id = -1
    greedy = engine.generate(prompts, Sampling(0.0, 1.0, 10), seed=0)
    assert [x.response_ids for x in greedy] == _reference_greedy(model, prompts, 10)
    sampled = engine.generate(prompts, Sampling(1.0, 1.0, 10), seed=0)
    for x in sampled:
        ids = torch.tensor([x.prompt_ids + x.response_ids])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, len(x.prompt_ids) - 1:-1].float()
        ref = torch.log_softmax(logits, -1).gather(-1, torch.tensor(x.response_ids)[:, None])
        assert torch.allclose(torch.tensor(x.logprobs), ref[:, 0], atol=1e-4)


def test_decode_mask_opens_one_slot_per_step():
    from drmas.rollout.decode import DecodeMask

    steps = DecodeMask(torch.tensor([[0, 1, 1], [1, 1, 1]]), new_tokens=3)
    assert steps.at(1)[:, 0, 0].tolist() == [[False, True, True, True], [True, True, True, True]]
    assert steps.at(2)[:, 0, 0].tolist() == [[False, True, True, True, True],
                                             [True, True, True, True, True]]


def test_repeated_prompts_sample_what_a_prefill_per_row_samples(monkeypatch):
    """One prefill per distinct prompt, its cache rows repeated, gives the samples (same
    generator) that a prefill of every row gives; the copies still sample apart."""
    import drmas.rollout.hf as hf

    model = _gqa_model(seed=2)
    repeated = [p for p in _prompts(seed=2)[:4] for _ in range(5)]
    engine = HFEngine(model, _Tok(), batch_size=64)
    engine.eos_id = -1
    shared = engine.generate(repeated, Sampling(1.0, 1.0, 8), seed=11)
    monkeypatch.setattr(hf, "distinct_prompts", lambda ps: ([list(p) for p in ps], list(range(len(ps)))))
    per_row = engine.generate(repeated, Sampling(1.0, 1.0, 8), seed=11)
    assert [g.response_ids for g in shared] == [g.response_ids for g in per_row]
    for a, b in zip(shared, per_row):
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-5)
    assert len({tuple(g.response_ids) for g in shared[:5]}) > 1


def _repeat_kv_attention(q, k, v, mask, scale):
    """Plain attention with keys / values repeated to the query heads."""
    groups = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1)
    scores = (q @ k.transpose(-1, -2)) * scale
    scores = scores.masked_fill(~mask, float("-inf"))
    return (torch.softmax(scores, -1) @ v).transpose(1, 2)


@pytest.mark.parametrize("dtype,atol", [(torch.float32, 1e-6), (torch.bfloat16, 2e-2)])
def test_decode_attention_equals_repeated_key_attention(dtype, atol):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(5, 6, 1, 16, generator=g).to(dtype)
    k = torch.randn(5, 2, 30, 16, generator=g).to(dtype)
    v = torch.randn(5, 2, 30, 16, generator=g).to(dtype)
    mask = torch.ones(5, 1, 1, 30, dtype=torch.bool)
    mask[0, ..., :7] = False                                  # left padding
    mask[3, ..., 20:] = False                                 # slots not written yet
    module = torch.nn.Module()
    out, _ = decode_attention(module, q, k, v, mask, scaling=0.25)
    ref = _repeat_kv_attention(q.float(), k.float(), v.float(), mask, 0.25)
    assert out.shape == (5, 1, 6, 16)
    assert torch.allclose(out.float(), ref, atol=atol)
    # a mask narrower than the cache (DecodeMask: the slots written) reads that part only
    narrow, _ = decode_attention(module, q, k, v, mask[..., :24], scaling=0.25)
    written = mask.clone()
    written[..., 24:] = False
    assert torch.allclose(narrow.float(), _repeat_kv_attention(q.float(), k.float(), v.float(),
                                                               written, 0.25), atol=atol)


def test_preallocated_layer_writes_in_place_and_refuses_overflow():
    layer = PreallocatedLayer(capacity=6)
    k, v = torch.randn(2, 1, 4, 3), torch.randn(2, 1, 4, 3)
    keys, values = layer.update(k, v)
    assert keys.shape == (2, 1, 6, 3) and layer.get_seq_length() == 4
    assert torch.equal(keys[:, :, :4], k) and torch.equal(values[:, :, :4], v)
    storage = keys.data_ptr()
    k2 = torch.randn(2, 1, 1, 3)
    keys, _ = layer.update(k2, k2)
    assert keys.data_ptr() == storage and torch.equal(keys[:, :, 4:5], k2)
    assert layer.get_mask_sizes(1) == (6, 0)
    layer.batch_repeat_interleave(torch.tensor([2, 1]))
    assert layer.keys.shape[0] == 3 and torch.equal(layer.keys[1], layer.keys[0])
    with pytest.raises(RuntimeError, match="cache full"):
        layer.update(torch.randn(3, 1, 2, 3), torch.randn(3, 1, 2, 3))


def test_preallocated_cache_has_every_layer_from_the_start():
    cache = preallocated_cache(_gqa_model(), 20)
    assert len(cache.layers) == 2 and cache.get_mask_sizes(7, 0) == (20, 0)


def test_sliding_window_layers_are_refused_in_one_line():
    from drmas.errors import ConfigError

    model = _gqa_model()
    model.config.layer_types = ["full_attention", "sliding_attention"]
    with pytest.raises(ConfigError, match="sliding_attention layers: use engine: vllm"):
        preallocated_cache(model, 20)


def test_decoding_switches_sdpa_models_only_and_restores():
    model = _gqa_model()
    with decoding(model):
        assert model.config._attn_implementation == NAME
    assert model.config._attn_implementation == "sdpa"
    model.set_attn_implementation("eager")
    with decoding(model):
        assert model.config._attn_implementation == "eager"


def test_distinct_prompts_keep_order_and_count_runs():
    prompts = [[1], [1], [2], [2], [2], [1], [3]]
    unique, index = distinct_prompts(prompts)
    assert unique == [[1], [2], [1], [3]]
    assert index == [0, 0, 1, 1, 1, 2, 3]


@pytest.mark.parametrize("kwargs, message", [({"top_p": 0.0}, "top_p must be in"),
                                             ({"top_p": 1.5}, "top_p must be in"),
                                             ({"max_tokens": 0}, "max_tokens must be at least 1")])
def test_sampling_refuses_settings_that_decode_nothing(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Sampling(**kwargs)
