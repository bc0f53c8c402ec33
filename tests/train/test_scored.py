"""The scored-last-layer forward (drmas/train/scored.py) against the plain one: the same
log-probs and, up to float rounding, the same gradients of an SFT loss, on a grouped-query
Qwen2 and a Llama with ragged prompts and responses; the warm start uses it when asked."""

import random

import pytest
import torch

from drmas.train.logprobs import pack, response_logprobs
from drmas.train.scored import prefix_cache, scored_logprobs, scored_positions, supported

PAD = 0


def model_of(kind: str, attn: str = "sdpa"):
    """A random-weight float32 causal LM with 4 query heads over 2 key/value heads, 3 layers."""
    import transformers

    torch.manual_seed(0)
    shape = dict(vocab_size=61, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                 tie_word_embeddings=True, attn_implementation=attn)
    if kind == "qwen2":
        config = transformers.Qwen2Config(use_sliding_window=False, **shape)
        return transformers.Qwen2ForCausalLM(config).float()
    config = transformers.LlamaConfig(**shape)
    return transformers.LlamaForCausalLM(config).float()


def rows(seed: int = 0):
    """Ragged rows: prompts of 1-14 tokens, responses of 1-9 (one prompt of a single token)."""
    rng = random.Random(seed)

    def toks(n):
        return [rng.randrange(1, 61) for _ in range(n)]

    prompts = [toks(n) for n in (14, 1, 6, 9, 3, 12)]
    responses = [toks(n) for n in (5, 9, 1, 3, 7, 2)]
    return pack(prompts, responses, PAD)


def grads_of(model, logprobs_fn):
    """Logprobs and the gradient of a weighted SFT loss (a row weight per row, so rows and
    positions are told apart)."""
    ids, attn, resp = rows()
    model.zero_grad(set_to_none=True)
    lp = logprobs_fn(model, ids, attn, resp)
    weights = torch.linspace(0.5, 1.5, ids.shape[0])[:, None]
    (-(lp * resp * weights).sum() / resp.sum()).backward()
    return lp.detach(), resp, {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("kind", ["qwen2", "llama"])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_scored_equals_plain_forward(kind, temperature):
    model = model_of(kind)
    model.train()
    assert supported(model)
    plain = grads_of(model, lambda m, i, a, r: response_logprobs(m, i, a, temperature, resp=r)[0])
    ours = grads_of(model, lambda m, i, a, r: scored_logprobs(m, i, a, r, temperature))
    resp = plain[1]
    assert torch.allclose(plain[0] * resp, ours[0], atol=1e-5, rtol=0)
    assert float(ours[0][resp == 0].abs().max()) == 0.0          # nothing outside the mask
    for name, g in plain[2].items():
        assert torch.allclose(g, ours[2][name], atol=1e-5, rtol=1e-4), name
    assert any(float(g.abs().max()) > 1e-3 for g in ours[2].values())


def test_scored_equals_plain_forward_under_bf16_autocast():
    """The path of a bf16 warm start (a GPU, an AMX CPU): under autocast both forwards round
    to bf16 in the same places, so log-probs agree to bf16's precision."""
    from drmas.models.precision import autocast

    model = model_of("qwen2")
    ids, attn, resp = rows()
    with torch.no_grad(), autocast(torch.device("cpu"), torch.bfloat16):
        plain = response_logprobs(model, ids, attn, resp=resp)[0] * resp
        ours = scored_logprobs(model, ids, attn, resp)
    assert ours.dtype == torch.float32
    assert torch.allclose(plain, ours, atol=2e-2, rtol=0)
    assert float(plain.abs().max()) > 1.0


def test_scored_positions_are_each_rows_response_columns():
    resp = torch.tensor([[0, 0, 1, 1, 1], [1, 0, 0, 0, 0], [0, 0, 0, 0, 0], [0, 1, 1, 0, 0]],
                        dtype=torch.float32)
    positions, valid = scored_positions(resp)
    assert positions.tolist() == [[2, 3, 4], [0, 0, 0], [0, 0, 0], [1, 2, 2]]
    assert valid.tolist() == [[True] * 3, [True, False, False], [False] * 3,
                              [True, True, False]]


def test_supported_only_where_the_computation_is_the_layers():
    assert not supported(model_of("qwen2", attn="eager"))     # its own attention numerics
    assert not supported(torch.nn.Linear(2, 2))
    dropping = model_of("llama")
    dropping.config.attention_dropout = 0.1                   # not reproduced here
    assert not supported(dropping)


def test_sft_scored_and_full_warm_starts_agree(tiny_model_dir, math_rows):
    """A few SFT steps of the tiny model on math demonstrations, both ways: the same loss
    curve and weights up to float rounding (the setting changes compute, not what is
    learned), and the weights did move."""
    from drmas.mas.math.demos import math_traces
    from drmas.models.tiny import load_model, load_tokenizer
    from drmas.train.sft import sft

    tok = load_tokenizer(tiny_model_dir)
    traces = math_traces([r for r in math_rows if r["split"] == "train"], seed=0, mistake_rate=0.3)
    start = load_model(tiny_model_dir).state_dict()
    assert supported(load_model(tiny_model_dir))
    out = {}
    for mode in ("full", "scored"):
        model = load_model(tiny_model_dir)
        losses = sft(model, tok, traces, steps=4, batch_size=12, lr=1e-3, seed=0,
                     dtype="float32", last_layer=mode)
        out[mode] = (losses, model.state_dict())
    assert out["full"][0] == pytest.approx(out["scored"][0], rel=1e-5)
    assert out["full"][0][0] > out["full"][0][-1]
    for name, w in out["full"][1].items():
        assert torch.allclose(w, out["scored"][1][name], atol=1e-5), name
        assert not torch.equal(w, start[name]) or "rotary" in name, name


@pytest.mark.parametrize("kind", ["qwen2", "llama"])
def test_prefix_cache_equals_the_models_cache(kind):
    """The keys and values the shared-prefix forward reads: bit for bit those of the model's
    own forward (the same operations), on right-padded prefixes of ragged lengths."""
    model = model_of(kind)
    ids, attn, _ = rows(1)
    with torch.no_grad():
        want = model(input_ids=ids, attention_mask=attn, use_cache=True).past_key_values
        got = prefix_cache(model, ids, attn)
    assert len(got.layers) == len(want.layers) == 3
    for mine, theirs in zip(got.layers, want.layers):
        assert torch.equal(mine.keys, theirs.keys) and torch.equal(mine.values, theirs.values)

