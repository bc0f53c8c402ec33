"""The transformers engine's decode loop against a transcription of the loop it replaced: that
one decoded every row to the end of the batch (a finished row's token replaced by pad) and
sorted the whole vocabulary for top-p. Finished rows now leave the batch and top-p looks at
the top k entries; the samples must not change."""

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

import drmas.rollout.hf as hf
from drmas.rollout.base import Sampling
from drmas.rollout.decode import (DecodeMask, PreallocatedLayer, decoding, distinct_prompts,
                                  preallocated_cache)
from drmas.rollout.hf import HFEngine, nucleus, sample_tokens, sorted_nucleus

EOS = 1


# -- the loop as it was (a transcription: the reference) -------------------------------------

def _old_sample_tokens(logits, sampling, generator):
    greedy = sampling.temperature <= 0
    logits = logits.float() / (1.0 if greedy else sampling.temperature)
    logprobs = torch.log_softmax(logits, dim=-1)
    if greedy:
        tokens = logits.argmax(-1)
    else:
        probs = logprobs.exp()
        if sampling.top_p < 1.0:
            sorted_p, order = probs.sort(dim=-1, descending=True)
            keep = sorted_p.cumsum(-1) - sorted_p < sampling.top_p   # always keeps the top token
            sorted_p = sorted_p * keep
            probs = torch.zeros_like(probs).scatter_(-1, order, sorted_p)
        tokens = _old_draw(probs, generator)
    return tokens, logprobs.gather(-1, tokens[:, None]).squeeze(-1)


def _old_draw(probs, generator):
    cdf = probs.cumsum(-1)
    total = cdf[:, -1:]
    u = torch.rand(total.shape, generator=generator, device=probs.device, dtype=cdf.dtype) * total
    u = torch.minimum(u, torch.nextafter(total, torch.zeros_like(total)))   # keep u < total
    return torch.searchsorted(cdf, u, right=True).squeeze(-1)


class _OldLoop(HFEngine):
    """Every row decoded until the whole batch is done."""

    def _generate_batch(self, prompts, sampling, generator):
        was_training = self.model.training
        self.model.eval()
        dev = self.device
        batch, width = len(prompts), max(len(p) for p in prompts)
        unique, index = distinct_prompts(prompts)
        ids = self._left_padded(unique, width)
        prompt_mask = (ids != -1).long()
        ids = ids.masked_fill(prompt_mask == 0, self.pad_id)
        positions = (prompt_mask.cumsum(-1) - 1).clamp(min=0)
        mask = torch.cat([prompt_mask, prompt_mask.new_ones((len(unique), sampling.max_tokens))], 1)
        past = preallocated_cache(self.model, width + sampling.max_tokens)
        with decoding(self.model) as ours:
            out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions,
                             past_key_values=past, use_cache=True, logits_to_keep=1)
            logits = out.logits[:, -1, :]
            if len(unique) < batch:
                counts = torch.bincount(torch.tensor(index), minlength=len(unique)).to(dev)
                past.batch_repeat_interleave(counts)
                logits = logits.repeat_interleave(counts, dim=0)
                mask = mask.repeat_interleave(counts, dim=0)
                positions = positions.repeat_interleave(counts, dim=0)
            decode_mask = DecodeMask(mask[:, :width], sampling.max_tokens) if ours else None
            new_tokens, new_logprobs = [], []
            done = torch.zeros(batch, dtype=torch.bool, device=dev)
            for step in range(sampling.max_tokens):
                if step:
                    out = self.model(input_ids=tokens[:, None],
                                     attention_mask=decode_mask.at(step) if ours else mask,
                                     position_ids=positions, past_key_values=past,
                                     use_cache=True, logits_to_keep=1)
                    logits = out.logits[:, -1, :]
                tokens, logprobs = _old_sample_tokens(logits, sampling, generator)
                tokens = torch.where(done, torch.full_like(tokens, self.pad_id), tokens)
                new_tokens.append(tokens)
                new_logprobs.append(logprobs)
                done = done | (tokens == self.eos_id)
                if bool(done.all()):
                    break
                positions = positions[:, -1:] + 1
        self.model.train(was_training)
        return self._unpack(prompts, torch.stack(new_tokens, 1).cpu(),
                            torch.stack(new_logprobs, 1).cpu())


# -- a tiny model whose rows stop at different steps -----------------------------------------

class _Tok:
    eos_token_id, pad_token_id = EOS, 0

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(map(str, ids))


def _model(seed=0, attention="sdpa", eos_bias=2.5):
    """A random Qwen2 (grouped-query attention) whose EOS logit is raised by `eos_bias`, so
    that rows finish at many different steps (a hook adds it per row: no batch arithmetic)."""
    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         tie_word_embeddings=False, attn_implementation=attention)
    model = Qwen2ForCausalLM(config).eval()
    bias = torch.zeros(97)
    bias[EOS] = eos_bias
    model.lm_head.register_forward_hook(lambda module, args, out: out + bias)
    return model


def _prompts(seed=0):
    """Distinct prompts of many lengths, and runs of one prompt (one prefill, copied rows)."""
    g = torch.Generator().manual_seed(seed)
    lengths = [5, 9, 3, 12, 7, 10, 4, 6, 11, 8, 2, 13]
    prompts = [torch.randint(2, 97, (n,), generator=g).tolist() for n in lengths]
    return prompts[:4] + [prompts[4]] * 4 + prompts[5:9] + [prompts[2]] * 3 + prompts[9:]


def _both(model, prompts, sampling, seed, batch_size, monkeypatch, eos=EOS):
    """(old loop's generations, new loop's, the sizes of the batches the new one kept)."""
    engine = _OldLoop(model, _Tok(), batch_size=batch_size)
    engine.eos_id = eos
    old = engine.generate(prompts, sampling, seed=seed)
    kept = []
    select = PreallocatedLayer.batch_select_indices
    monkeypatch.setattr(PreallocatedLayer, "batch_select_indices",
                        lambda self, i: (kept.append(len(i)), select(self, i)))
    engine = HFEngine(model, _Tok(), batch_size=batch_size)
    engine.eos_id = eos
    new = engine.generate(prompts, sampling, seed=seed)
    monkeypatch.undo()
    return old, new, kept


def _assert_same(old, new):
    assert [g.response_ids for g in new] == [g.response_ids for g in old]
    assert [g.finished for g in new] == [g.finished for g in old]
    assert [g.prompt_ids for g in new] == [g.prompt_ids for g in old]
    for a, b in zip(old, new):
        # a matmul over fewer rows may block its sums otherwise: the batch's composition changes
        # the logits by float32 rounding (an ulp of a logprob here), so a token could differ
        # only where a row's uniform falls within that rounding of a step of its cumulative
        # sum (about 1e-6 a token); the seeds here are ones where every token agrees
        assert torch.allclose(torch.tensor(b.logprobs), torch.tensor(a.logprobs), rtol=1e-6, atol=1e-6)


# (sampling, EOS id, EOS bias): sampled rows stop at a raised EOS; greedy ones (and a nucleus
# of the top token) at token 93, which this model's greedy rows reach at many different steps
CASES = [(Sampling(1.0, 1.0, 24), EOS, 1.0), (Sampling(0.7, 0.9, 24), EOS, 1.0),
         (Sampling(1.3, 0.5, 20), EOS, 2.0), (Sampling(1.0, 1e-6, 24), 93, 0.0),
         (Sampling(0.0, 1.0, 24), 93, 0.0)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"T{c[0].temperature}-p{c[0].top_p}")
@pytest.mark.parametrize("batch_size", [7, 64])
def test_dropping_finished_rows_samples_what_the_old_loop_sampled(case, batch_size, monkeypatch):
    """Token for token, over batches (one generator across them: every step still draws one
    uniform per row of the batch), distinct and repeated prompts of many lengths."""
    sampling, eos, bias = case
    model = _model(eos_bias=bias)
    prompts = _prompts()
    old, new, kept = _both(model, prompts, sampling, 3, batch_size, monkeypatch, eos)
    _assert_same(old, new)
    assert len({len(g.response_ids) for g in old if g.finished}) >= 4     # stopped at many steps
    assert any(not g.finished for g in old) and kept                      # and some never


def test_eager_attention_drops_rows_of_its_two_dimensional_mask(monkeypatch):
    """Attention other than sdpa gets the 2-D mask, whose rows leave with the cache's."""
    model = _model(seed=1, attention="eager")
    prompts = _prompts(seed=1)
    old, new, kept = _both(model, prompts, Sampling(1.0, 0.95, 20), 5, 64, monkeypatch)
    _assert_same(old, new)
    assert len({len(g.response_ids) for g in new}) >= 4 and kept


def test_the_tiny_model_with_its_tokenizer_samples_what_the_old_loop_sampled(tiny_model_dir):
    """The project's tiny model and chat-encoded prompts (its own EOS raised)."""
    from drmas.models.encoding import encode_prompt
    from drmas.models.tiny import load_model, load_tokenizer

    tok, model = load_tokenizer(tiny_model_dir), load_model(tiny_model_dir)
    bias = torch.zeros(model.config.vocab_size)
    bias[tok.eos_token_id] = 4.0
    model.lm_head.register_forward_hook(lambda module, args, out: out + bias)
    questions = ["Ann has 3 pens.", "Ben has 12 apples. Ben gets 4. How many?", "Hi"]
    prompts = [encode_prompt(tok, [{"role": "user", "content": q}]) for q in questions for _ in range(4)]
    sampling = Sampling(1.0, 0.95, 16)
    old = _OldLoop(model, tok, batch_size=8).generate(prompts, sampling, seed=1)
    new = HFEngine(model, tok, batch_size=8).generate(prompts, sampling, seed=1)
    _assert_same(old, new)
    assert [g.text for g in new] == [g.text for g in old]
    assert len({len(g.response_ids) for g in new if g.finished}) >= 3
    assert any(not g.finished for g in new)


def test_a_rows_samples_do_not_depend_on_other_rows_stopping():
    """Each row's draws are its own: a row's tokens in a batch whose rows finish and leave
    are those it samples when no row ever stops (same seed, same batch), up to its EOS."""
    model = _model(seed=2, eos_bias=3.0)
    prompts = _prompts(seed=2)
    sampling = Sampling(1.0, 1.0, 12)
    stopping = HFEngine(model, _Tok(), batch_size=64).generate(prompts, sampling, seed=9)
    never = HFEngine(model, _Tok(), batch_size=64)
    never.eos_id = -1
    endless = never.generate(prompts, sampling, seed=9)
    assert sum(g.finished for g in stopping) >= len(prompts) // 2
    for s, e in zip(stopping, endless):
        assert e.response_ids[:len(s.response_ids)] == s.response_ids


def test_preallocated_layer_keeps_the_selected_rows_in_place():
    layer = PreallocatedLayer(capacity=8)
    k, v = torch.randn(4, 2, 5, 3), torch.randn(4, 2, 5, 3)
    layer.update(k, v)
    storage = layer.keys.data_ptr()
    layer.batch_select_indices(torch.tensor([1, 3]))
    assert layer.keys.shape == (2, 2, 8, 3) and layer.keys.is_contiguous()
    assert layer.keys.data_ptr() == storage
    assert torch.equal(layer.keys[:, :, :5], k[[1, 3]]) and torch.equal(layer.values[:, :, :5], v[[1, 3]])
    assert not layer.keys[:, :, 5:].any() and not layer.values[:, :, 5:].any()
    k2 = torch.randn(2, 2, 1, 3)
    layer.update(k2, k2)
    assert torch.equal(layer.keys[:, :, 5:6], k2) and layer.get_seq_length() == 6


def test_worth_dropping_waits_for_a_quarter_of_the_rows():
    assert not hf.worth_dropping(0, 4) and hf.worth_dropping(1, 4)
    assert not hf.worth_dropping(15, 64) and hf.worth_dropping(16, 64)


# -- top-p without a full sort -----------------------------------------------------------------

def _logits(rows, vocab, kind, g):
    x = torch.randn(rows, vocab, generator=g)
    if kind == "peaked":                       # a trained model's: the nucleus is a few tokens
        return x * 6
    if kind == "bf16":                         # bf16 logits: long runs of equal values
        return (x * 4).to(torch.bfloat16).float()
    if kind == "coarse":                       # a few distinct values: ties everywhere
        return torch.round(x * 2) / 2
    if kind == "flat":                         # every entry equal: the cut within one tie
        return torch.zeros(rows, vocab)
    return x


SHAPES = [(1, 2), (3, 17), (5, 97), (4, 320), (6, 1000), (2, 5000), (2, 49152)]
KINDS = ["plain", "peaked", "bf16", "coarse", "flat"]
TOP_PS = [1.0, 0.999, 0.95, 0.9, 0.5, 0.1, 1e-3, 1e-7]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_nucleus_equals_the_full_sort_bit_for_bit(shape, monkeypatch):
    g = torch.Generator().manual_seed(shape[1])
    calls = []
    monkeypatch.setattr(hf, "sorted_nucleus", lambda p, t: (calls.append(len(p)), sorted_nucleus(p, t))[1])
    for kind in KINDS:
        for temperature in (0.6, 1.0, 1.7):
            logits = _logits(*shape, kind, g)
            probs = torch.softmax(logits / temperature, -1)
            for top_p in TOP_PS:
                assert torch.equal(nucleus(probs, top_p), sorted_nucleus(probs, top_p)), \
                    (kind, temperature, top_p)
                ref = _old_sample_tokens(logits, Sampling(temperature, top_p, 1),
                                         torch.Generator().manual_seed(1))
                new = sample_tokens(logits, Sampling(temperature, top_p, 1),
                                    torch.Generator().manual_seed(1))
                assert torch.equal(new[0], ref[0]) and torch.equal(new[1], ref[1])
    assert calls                                    # ties, flat rows, top_p near 1: sorted


def test_a_peaked_nucleus_needs_no_sort(monkeypatch):
    """A trained model's rows: a nucleus of a few to a hundred entries, nothing is sorted."""
    monkeypatch.setattr(hf, "sorted_nucleus", None)
    logits = torch.randn(8, 49152, generator=torch.Generator().manual_seed(0)) * 6
    probs = torch.softmax(logits, -1)
    out = nucleus(probs, 0.95)
    assert torch.equal(out, sorted_nucleus(probs, 0.95))
    assert (out > 0).sum(-1).min() > 1 and (out > 0).sum(-1).max() > hf.TOP_K   # two rounds


def test_nucleus_ties_across_the_cut_go_to_the_full_sort(monkeypatch):
    """Which of tied entries a nucleus keeps is the sort's choice: such a row is sorted."""
    probs = torch.tensor([[0.4, 0.3, 0.3] + [0.0] * 300, [0.5, 0.3, 0.2] + [0.0] * 300])
    calls = []
    monkeypatch.setattr(hf, "sorted_nucleus", lambda p, t: (calls.append(p.clone()), sorted_nucleus(p, t))[1])
    out = nucleus(probs, 0.6)
    assert torch.equal(out, sorted_nucleus(probs, 0.6))
    assert len(calls) == 1 and torch.equal(calls[0], probs[:1])   # only the tied row
    assert out[1, :3].tolist() == pytest.approx([0.5, 0.3, 0.0])
    assert (out[0] > 0).sum() == 2 and out[0, 0] == probs[0, 0]


def test_greedy_sampling_is_unchanged():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(9, 500, generator=g)
    for top_p in (1.0, 0.5):
        gen_a, gen_b = torch.Generator().manual_seed(4), torch.Generator().manual_seed(4)
        ref = _old_sample_tokens(logits, Sampling(0.0, top_p, 1), gen_a)
        new = sample_tokens(logits, Sampling(0.0, top_p, 1), gen_b)
        assert torch.equal(new[0], ref[0]) and torch.equal(new[1], ref[1])
        assert torch.equal(gen_a.get_state(), gen_b.get_state())      # no draws either way


def test_draw_uses_the_present_rows_uniforms():
    """With `present`, one uniform is drawn per row of the whole batch and each present row
    gets its own: the same index it draws with every row present."""
    probs = torch.softmax(torch.randn(6, 40, generator=torch.Generator().manual_seed(0)), -1)
    full = hf.draw(probs, torch.Generator().manual_seed(2))
    present = torch.tensor([True, False, True, True, False, True])
    some = hf.draw(probs[present], torch.Generator().manual_seed(2), present)
    assert torch.equal(some, full[present])
