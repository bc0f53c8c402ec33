"""The shared-prefix forward (drmas/train/prefix.py) against the unshared one: log-probs,
entropies and the gradients of a policy-like loss with an entropy term agree to 1e-5 on a
grouped-query Qwen2 with ragged prompts and responses; the grouping and the micro-batches."""

import random

import pytest
import torch

from drmas.train.logprobs import pack, response_logprobs
from drmas.train.prefix import (padded_positions, prefix_chunks, prefix_groups,
                                shared_response_logprobs, shared_tokens, update_tokens)

PAD = 0


def gqa_model(attn: str = "sdpa"):
    """A random-weight float32 Qwen2 with 4 query heads over 2 key/value heads."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=61, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                         tie_word_embeddings=True, use_sliding_window=False,
                         attn_implementation=attn)
    return Qwen2ForCausalLM(config).float()


def batch(seed: int = 0):
    """Ragged rows in several prefix situations: a GRPO group of 3 identical prompts; 4
    prompts that share only their first 7 tokens (later turns of one problem); a lone row;
    a prompt that is the start of another's. Rows are shuffled so groups interleave."""
    rng = random.Random(seed)

    def toks(n):
        return [rng.randrange(1, 61) for _ in range(n)]

    same, head, lone, short = toks(12), toks(7), toks(6), toks(5)
    prompts = [same] * 3 + [head + toks(k) for k in (3, 7, 2, 4)] + [lone] + [short, short + toks(4)]
    responses = [toks(k) for k in (5, 1, 9, 3, 6, 2, 8, 4, 7, 3)]
    order = list(range(len(prompts)))
    rng.shuffle(order)
    return [prompts[i] for i in order], [responses[i] for i in order]


def loss_of(lp, entropy, resp):
    """A PPO-like loss: clipped ratios against fixed old logprobs, advantages of both signs,
    an entropy bonus; token mean."""
    adv = torch.linspace(-1.0, 1.2, lp.shape[0])[:, None]
    old = (lp.detach() + 0.3 * torch.sin(torch.arange(lp.shape[1], dtype=torch.float32)))
    ratio = torch.exp(lp - old)
    pg = torch.maximum(-adv * ratio, -adv * ratio.clamp(0.8, 1.2))
    return ((pg - 0.05 * entropy) * resp).sum() / resp.sum()


def run(model, prompts, responses, shared: bool):
    model.zero_grad(set_to_none=True)
    if shared:
        lp, entropy, resp = shared_response_logprobs(model, prompts, responses, PAD, 0.7,
                                                     with_entropy=True, entropy_grad=True)
    else:
        ids, attn, resp = pack(prompts, responses, PAD)
        lp, entropy = response_logprobs(model, ids, attn, 0.7, with_entropy=True, resp=resp,
                                        entropy_grad=True)
    loss_of(lp, entropy, resp).backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    return lp.detach(), entropy.detach(), resp, grads


def test_the_cut_prefix_pass_changes_no_bit(monkeypatch):
    """With `scored.prefix_cache` (a prefix's last layer stops at its keys and values) against
    the model's own cache: a prefix's last-layer outputs reach no loss, so log-probs, entropies
    and gradients are bit-identical (the default profile's RL numbers stay)."""
    from drmas.train import scored

    model = gqa_model()
    prompts, responses = batch(3)
    assert scored.supported(model)
    cut = run(model, prompts, responses, shared=True)
    monkeypatch.setattr(scored, "supported", lambda m: False)
    whole = run(model, prompts, responses, shared=True)
    assert torch.equal(cut[0], whole[0]) and torch.equal(cut[1], whole[1])
    assert all(torch.equal(cut[3][n], whole[3][n]) for n in cut[3])
    assert any(float(g.abs().max()) > 1e-3 for g in cut[3].values())


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_shared_prefix_equals_unshared(attn):
    torch.set_num_threads(1)
    model = gqa_model(attn).train()
    prompts, responses = batch()
    lp0, ent0, resp0, g0 = run(model, prompts, responses, shared=False)
    lp1, ent1, resp1, g1 = run(model, prompts, responses, shared=True)
    assert torch.equal(resp0, resp1)
    on = resp0 > 0
    assert torch.allclose(lp1[on], lp0[on], atol=1e-5, rtol=0)
    assert torch.allclose(ent1[on], ent0[on], atol=1e-5, rtol=0)
    # the comparison can fail: rows of one group differ, and every weight has a gradient
    assert len({round(float(lp0[b][on[b]][0]), 4) for b in range(len(prompts))}) > 5
    for name, g in g0.items():
        assert g.abs().max() > 0, name
        assert torch.allclose(g1[name], g, atol=1e-5, rtol=1e-4), \
            (name, float((g1[name] - g).abs().max()))


def test_bf16_autocast_runs_and_agrees_to_bf16_rounding():
    """Under bf16 autocast (how training runs where bf16 is fast) the shared forward runs
    and agrees with the unshared one up to bf16's rounding; gradients reach every weight."""
    model = gqa_model().train()
    prompts, responses = batch(seed=2)
    ids, attn, resp = pack(prompts, responses, PAD)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want, _ = response_logprobs(model, ids, attn, resp=resp)
        got, _, _ = shared_response_logprobs(model, prompts, responses, PAD)
    on = resp > 0
    assert got.dtype == torch.float32
    assert torch.allclose(got[on], want[on], atol=1e-2, rtol=0)
    (got * resp).sum().backward()
    assert all(p.grad is not None and p.grad.abs().max() > 0 for p in model.parameters())


def test_single_row_and_no_grad_recomputation():
    """One row alone (its prefix is its prompt less one token), and the no-grad call the old
    and reference log-probs make, at temperature 1."""
    torch.set_num_threads(1)
    model = gqa_model().eval()
    prompts, responses = batch(seed=1)
    for ps, rs in (([prompts[0]], [responses[0]]), (prompts, responses)):
        ids, attn, resp = pack(ps, rs, PAD)
        with torch.no_grad():
            want, _ = response_logprobs(model, ids, attn, resp=resp)
            got, entropy, resp1 = shared_response_logprobs(model, ps, rs, PAD)
        assert entropy is None and torch.equal(resp, resp1)
        assert torch.allclose(got[resp > 0], want[resp > 0], atol=1e-5, rtol=0)


def test_one_token_prompt_falls_back_to_unshared():
    model = gqa_model().eval()
    prompts, responses = [[5], [5], [7, 8, 9]], [[1, 2], [3], [4, 4]]
    ids, attn, resp = pack(prompts, responses, PAD)
    with torch.no_grad():
        want, _ = response_logprobs(model, ids, attn, resp=resp)
        got, _, _ = shared_response_logprobs(model, prompts, responses, PAD)
    assert torch.equal(got * resp, want * resp)


def test_groups_take_the_longest_common_prefix():
    a, b = [1, 2, 3, 4, 5, 6], [1, 2, 3, 9, 9, 9, 9]
    prompts = [a, b, a, [7, 7], a, b, [1, 2]]
    groups = sorted(prefix_groups(prompts), key=lambda g: sorted(g[0]))
    # three a's share 5 tokens (all but one of a's 6); a's and b's share 3 more, which saves
    # less than cutting them apart; [1, 2] and [7, 7] stand alone
    assert groups == [([0, 2, 4], 5), ([1, 5], 6), ([3], 1), ([6], 1)]
    assert sorted(i for g, _ in prefix_groups(prompts, max_rows=2) for i in g) == list(range(7))
    assert all(len(g) <= 2 for g, _ in prefix_groups(prompts, max_rows=2))
    # only a shared head: four prompts that agree on 4 tokens share them
    heads = [[1, 2, 3, 4, k, k] for k in (5, 6, 7, 8)]
    assert prefix_groups(heads) == [([0, 1, 2, 3], 4)]
    assert prefix_groups([]) == []


def test_prefix_chunks_keep_groups_together_within_budget():
    rng = random.Random(0)
    prompts, lengths = [], []
    for g in range(6):
        prompt = [g + 1] * rng.randint(20, 60)
        for _ in range(8):
            prompts.append(prompt)
            lengths.append(len(prompt) + rng.randint(1, 30))
    order = list(range(len(prompts)))
    rng.shuffle(order)
    prompts, lengths = [prompts[i] for i in order], [lengths[i] for i in order]
    for max_rows, max_tokens in ((16, 1 << 30), (8, 1 << 30), (16, 200), (5, 120)):
        chunks = prefix_chunks(prompts, lengths, max_rows, max_tokens)
        assert sorted(i for c in chunks for i in c) == list(range(len(prompts)))
        for c in chunks:
            groups = [([c[k] for k in g], p) for g, p in prefix_groups([prompts[i] for i in c])]
            assert len(c) <= max_rows
            assert len(c) == 1 or padded_positions(groups, lengths) <= max_tokens
        if max_tokens > 1 << 20:       # whole groups: one prompt per chunk row set
            assert all(len({tuple(prompts[i]) for i in c}) == len(c) // min(8, max_rows)
                       for c in chunks)
        full = sum(lengths)
        saved = shared_tokens(prompts, lengths, chunks)
        assert saved < full
    one = prefix_chunks(prompts, lengths, 8, 1 << 30)
    assert shared_tokens(prompts, lengths, one) == sum(
        len(prompts[c[0]]) - 1 + sum(lengths[i] - len(prompts[i]) + 1 for i in c) for c in one)


def test_update_tokens_counts_each_prefix_once():
    """Two GRPO groups of 3 (prompts of 10 and 20 tokens), responses of 2-4 tokens, in one
    micro-batch: unshared, every row whole (padded to the longest row); shared, each prompt
    less its last token once, then every row's last prompt token and its response."""
    prompts = [[1] * 10] * 3 + [[2] * 20] * 3
    responses = [2, 3, 4, 2, 3, 4]
    lengths = [len(p) + r for p, r in zip(prompts, responses)]
    out = update_tokens(prompts, lengths, max_rows=8, max_tokens=1 << 20)
    assert out["unshared"] == {"tokens": 3 * 10 + 3 * 20 + 2 * 9, "padded": 6 * 24}
    # prefixes 9 and 19; suffixes 1 + response: 3 + 4 + 5 per group
    assert out["shared"]["tokens"] == 9 + 19 + 2 * (3 + 4 + 5)
    assert out["shared"]["padded"] == 2 * 19 + 6 * 5


# -- the worker group's paths: update, old and reference log-probs, paired measurement ----

def grouped_rows(group, seed=0):
    """Rows as a step makes them: GRPO groups of 4 samples of one prompt, and later-turn
    prompts of one problem that share its system text and question, then differ."""
    from drmas.rollout.base import Sampling
    from rows import AGENTS

    system = {"role": "system", "content": "You are a careful solver of sums."}
    prompts = [[system, {"role": "user", "content": f"What is {i} + {i + 2}?"}]
               for i in range(3) for _ in range(4)]
    prompts += [[system, {"role": "user", "content": "What is 4 + 5?"},
                 {"role": "assistant", "content": f"It is {k}."},
                 {"role": "user", "content": "Check it."}] for k in range(5)]
    gens = group.generate(prompts, Sampling(1.0, 1.0, 8), seed=seed)
    rng = random.Random(seed)
    return [{"agent": AGENTS[i >= 12], "prompt_ids": g.prompt_ids, "response_ids": g.response_ids,
             "logprobs": g.logprobs, "advantage": rng.uniform(-1, 1)} for i, g in enumerate(gens)]


def groups_pair(model_dir, **settings):
    from drmas.config.profile import TrainConfig
    from drmas.train.workers import LocalGroup
    from rows import AGENTS

    base = dict(lr=1e-3, micro_batch_rows=4, max_response_tokens=8, entropy_coeff=0.01,
                recompute_logprobs=True, **settings)
    return (LocalGroup("g", model_dir, AGENTS, TrainConfig(**base, shared_prefix=False)),
            LocalGroup("g", model_dir, AGENTS, TrainConfig(**base, shared_prefix=True)))


def old_logprobs(group, rows):
    from drmas.train.workers import rank_chunks
    from rows import AGENTS

    s = group.settings
    lengths = [len(r["prompt_ids"]) + len(r["response_ids"]) for r in rows]
    plan = [[(a, rank_chunks([i for i, r in enumerate(rows) if r["agent"] == a], 0, 1,
                             s.micro_batch_rows, lengths, s.micro_batch_tokens,
                             group._prompts(rows))) for a in AGENTS]]
    return group._old_logprobs(rows, plan), plan


@pytest.mark.parametrize("lora", [0, 4])
def test_group_paths_with_shared_prefix_equal_unshared(tiny_model_dir, lora):
    """Old log-probs recomputed, the update's gradient (PPO clip + entropy bonus, verl
    weights) and the paired measurement: the same with and without sharing, on full weights
    and on LoRA adapters (peft passes the cache and positions through)."""
    from rows import captured_gradient

    torch.set_num_threads(1)
    plain, shared = groups_pair(tiny_model_dir, lora_rank=lora, lora_alpha=8)
    rows = grouped_rows(plain)
    (old0, _), (old1, plan) = old_logprobs(plain, rows), old_logprobs(shared, rows)
    assert set(old0) == set(old1) == set(range(len(rows)))
    for i in old0:
        assert torch.allclose(old1[i], old0[i], atol=1e-5, rtol=0)
    solver_chunks = plan[0][0][1]        # 3 groups of 4 identical prompts, 4 rows a chunk
    assert sorted(len({tuple(rows[i]["prompt_ids"]) for i in c}) for c in solver_chunks) == [1, 1, 1]
    sets = {"a": [r["advantage"] for r in rows], "b": [1.0 - r["advantage"] for r in rows]}
    p0, p1 = plain.paired_grad_sq(rows, sets), shared.paired_grad_sq(rows, sets)
    for agent, values in p0.items():
        for key, v in values.items():
            assert p1[agent][key] == pytest.approx(v, rel=1e-5), (agent, key)
    g0, g1 = captured_gradient(plain, rows), captured_gradient(shared, rows)
    assert sum(float(g.abs().sum()) for g in g0) > 0
    for a, b in zip(g0, g1):
        assert torch.allclose(b, a, atol=1e-5, rtol=1e-4)


def test_reference_with_shared_prefix_equals_unshared(tiny_model_dir):
    from drmas.config.profile import TrainConfig
    from drmas.train.reference import ReferencePolicy

    plain, _ = groups_pair(tiny_model_dir)
    rows = grouped_rows(plain, seed=1)
    out = [ReferencePolicy(plain.model, plain.tokenizer.pad_token_id,
                           TrainConfig(micro_batch_rows=5, shared_prefix=shared),
                           torch.device("cpu")).logprobs(rows) for shared in (False, True)]
    assert [len(x) for x in out[1]] == [len(r["response_ids"]) for r in rows]
    for a, b in zip(*out):
        assert torch.allclose(torch.tensor(b), torch.tensor(a), atol=1e-5, rtol=0)


def approx_equal(a, b, rel=1e-4, abs_=1e-6) -> bool:
    """Two metrics records equal, numbers up to float rounding."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(approx_equal(a[k], b[k], rel, abs_) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(approx_equal(x, y, rel, abs_) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return a == pytest.approx(b, rel=rel, abs=abs_, nan_ok=True)
    return a == b


def test_run_with_shared_prefix_equals_a_run_without(tiny_model_dir, math_rows, tmp_path):
    """Two RL steps of the math MAS (Solver, Verifier, a second Solver turn: prompts that
    share their head) with every path on (recomputed old log-probs, the KL reference, the
    entropy bonus, the paired measurement): the same metrics and weights, sharing or not."""
    from conftest import make_config
    from training import final_weights, make_trainer, stripped

    torch.set_num_threads(1)
    train = [r for r in math_rows if r["split"] == "train"]
    for shared in (False, True):
        cfg = make_config(tiny_model_dir, steps=2, save_every=2, micro_batch_rows=4,
                          recompute_logprobs=True, kl_in_reward=True, entropy_coeff=0.01,
                          paired_every=1, shared_prefix=shared)
        make_trainer(cfg, train, tmp_path / str(shared), "shared", "drmas").run()
    off, on = (stripped(tmp_path / str(s) / "metrics.jsonl") for s in (False, True))
    assert approx_equal(on, off)
    w0, w1 = final_weights(tmp_path / "False"), final_weights(tmp_path / "True")
    assert max(float((w1[k] - w0[k]).abs().max()) for k in w0) < 1e-5
