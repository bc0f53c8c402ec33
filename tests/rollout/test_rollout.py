"""The transformers engine: shapes, stop at EOS, seeding, and logprobs equal to a direct
teacher-forced forward pass (the quantity the trainer differentiates)."""

import pytest
import torch

from drmas.models.tiny import load_model, load_tokenizer
from drmas.rollout.base import Sampling
from drmas.rollout.hf import HFEngine, draw, sample_tokens
from drmas.train.logprobs import pack, response_logprobs
from drmas.models.encoding import encode_prompt


def _engine(path, batch_size=4):
    tok = load_tokenizer(path)
    return HFEngine(load_model(path), tok, batch_size=batch_size), tok


def _prompts(tok):
    questions = ["Ann has 3 pens.", "Ben has 12 apples. Ben gets 4. How many?", "Hi", "Cara buys 2 bags."]
    return [encode_prompt(tok, [{"role": "user", "content": q}]) for q in questions * 2]


def test_shapes_and_eos(tiny_model_dir):
    engine, tok = _engine(tiny_model_dir)
    prompts = _prompts(tok)
    assert len({len(p) for p in prompts}) > 1              # left padding is exercised
    gens = engine.generate(prompts, Sampling(1.0, 1.0, 12), seed=0)
    assert len(gens) == len(prompts)
    for p, g in zip(prompts, gens):
        assert g.prompt_ids == p
        assert 1 <= len(g.response_ids) <= 12
        assert len(g.logprobs) == len(g.response_ids)
        assert all(lp <= 0 for lp in g.logprobs)
        if g.finished:
            assert g.response_ids[-1] == tok.eos_token_id
            assert tok.eos_token_id not in g.response_ids[:-1]
        else:
            assert len(g.response_ids) == 12


def test_logprobs_match_direct_forward(tiny_model_dir):
    engine, tok = _engine(tiny_model_dir, batch_size=3)       # several batches, ragged lengths
    prompts = _prompts(tok)
    for temperature in (1.0, 0.6):
        gens = engine.generate(prompts, Sampling(temperature, 0.95, 16), seed=3)
        ids, attn, resp = pack([g.prompt_ids for g in gens], [g.response_ids for g in gens],
                               tok.pad_token_id)
        with torch.no_grad():
            lp, _ = response_logprobs(engine.model, ids, attn, temperature)
        for g, ref in zip(gens, (lp[b][resp[b] > 0].tolist() for b in range(lp.shape[0]))):
            assert torch.allclose(torch.tensor(g.logprobs), torch.tensor(ref), atol=1e-4)


def test_prompt_positions_skip_the_output_layer_with_the_same_response_values(tiny_model_dir):
    """With the response mask, logits are computed from the batch's first response position
    on (`logits_to_keep`): same logprobs and entropies there, 0 before, fewer logits made."""
    engine, tok = _engine(tiny_model_dir)
    prompts = _prompts(tok)
    gens = engine.generate(prompts, Sampling(1.0, 1.0, 12), seed=1)
    ids, attn, resp = pack([g.prompt_ids for g in gens], [g.response_ids for g in gens],
                           tok.pad_token_id)
    shapes = []
    hook = engine.model.lm_head.register_forward_hook(lambda m, i, o: shapes.append(o.shape[1]))
    with torch.no_grad():
        full, full_ent = response_logprobs(engine.model, ids, attn, with_entropy=True)
        kept, kept_ent = response_logprobs(engine.model, ids, attn, with_entropy=True, resp=resp)
    hook.remove()
    start = min(len(g.prompt_ids) for g in gens) - 1          # the first response position
    assert shapes == [ids.shape[1], ids.shape[1] - start]
    assert kept.shape == full.shape and kept_ent.shape == full_ent.shape
    assert torch.equal(kept[:, :start], torch.zeros_like(kept[:, :start]))
    mask = resp > 0
    torch.testing.assert_close(kept[mask], full[mask], rtol=0, atol=1e-6)
    torch.testing.assert_close(kept_ent[mask], full_ent[mask], rtol=0, atol=1e-6)


def test_same_seed_same_samples(tiny_model_dir):
    engine, tok = _engine(tiny_model_dir)
    prompts = _prompts(tok)
    a = engine.generate(prompts, Sampling(1.0, 1.0, 10), seed=7)
    b = engine.generate(prompts, Sampling(1.0, 1.0, 10), seed=7)
    c = engine.generate(prompts, Sampling(1.0, 1.0, 10), seed=8)
    assert [g.response_ids for g in a] == [g.response_ids for g in b]
    assert [g.response_ids for g in a] != [g.response_ids for g in c]


def test_top_p_keeps_only_the_nucleus():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    gen = torch.Generator().manual_seed(0)
    seen = {int(sample_tokens(logits, Sampling(1.0, 0.7, 1), gen)[0]) for _ in range(300)}
    assert seen == {0, 1}                  # 0.5 + 0.3 covers 0.7; tokens 2, 3 are cut
    seen = {int(sample_tokens(logits, Sampling(1.0, 0.1, 1), gen)[0]) for _ in range(50)}
    assert seen == {0}                     # the top token is always kept


def test_draw_matches_the_probabilities():
    """Frequencies of 100,000 draws per row against the rows' own probabilities (unnormalised,
    with zero entries): every count within 5 binomial standard deviations, zeros never."""
    probs = torch.tensor([[0.1, 0.0, 0.6, 0.3, 0.0],
                          [0.0, 0.0, 0.0, 2.0, 0.0],          # one entry, total 2
                          [3.0, 1.0, 0.0, 0.0, 0.0]])         # zeros at the end
    n = 100_000
    gen = torch.Generator().manual_seed(0)
    drawn = draw(probs.repeat_interleave(n, dim=0), gen).view(3, n)
    for row, p in zip(drawn, probs / probs.sum(-1, keepdim=True)):
        counts = torch.bincount(row, minlength=5).double()
        sd = (n * p * (1 - p)).sqrt()
        assert ((counts - n * p).abs() <= 5 * sd + 1e-9).all(), (counts.tolist(), p.tolist())
        assert (counts[p == 0] == 0).all()


@pytest.mark.parametrize("u, expected", [(0.0, [0, 3, 0]), (1.0, [3, 3, 1])])
def test_draw_at_the_ends_of_the_unit_interval(monkeypatch, u, expected):
    """A draw of 0 takes the first entry with a positive probability; a draw whose product with
    the total reaches the total (the guard against rounding) the last one; never a zero entry."""
    probs = torch.tensor([[0.1, 0.0, 0.6, 0.3, 0.0], [0.0, 0.0, 0.0, 2.0, 0.0],
                          [3.0, 1.0, 0.0, 0.0, 0.0]])
    monkeypatch.setattr(torch, "rand", lambda shape, **kw: torch.full(shape, u, dtype=kw.get("dtype")))
    assert draw(probs, torch.Generator()).tolist() == expected


def test_sft_micro_batches_equal_one_padded_batch(tiny_model_dir, math_rows):
    """Length-sorted micro-batches change the arithmetic order only: same losses and weights
    as one padded batch (float32, so the comparison is tight)."""
    from drmas.mas.math.demos import math_traces
    from drmas.models.tiny import load_model
    from drmas.train.sft import sft

    tok = load_tokenizer(tiny_model_dir)
    traces = math_traces([r for r in math_rows if r["split"] == "train"], seed=0, mistake_rate=0.3)
    runs = []
    for budget in (1 << 30, 64):                      # one batch vs many small chunks
        model = load_model(tiny_model_dir)
        losses = sft(model, tok, traces, steps=3, batch_size=12, lr=1e-3, seed=0, dtype="float32",
                     micro_batch_tokens=budget)
        runs.append((losses, model.state_dict()))
    (l1, w1), (l2, w2) = runs
    assert l1 == pytest.approx(l2, rel=1e-5) and l1[0] > l1[-1]
    assert all(torch.allclose(w1[k], w2[k], atol=1e-5) for k in w1)
