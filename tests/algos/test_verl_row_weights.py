"""Loss weights under `loss_aggregation: verl` (drmas/algos/loss.py, `verl_row_denominators`;
drmas/train/workers.py, `GroupWorker.update`): each row weighs what it weighs in upstream's
layout (the mini-batch's rows in data order, dealt to the ranks in contiguous shares, micro-
batches of `micro_batch_rows` rows per device, agents mixed; token mean per micro-batch, mean
over a rank's micro-batches, FSDP's mean over ranks), whatever micro-batches the worker runs
(per agent, sorted by length). `minibatch` aggregation is unchanged."""

import random

import pytest
import torch

from drmas.algos.loss import LossOptions, LossScale, policy_loss, verl_row_denominators
from drmas.config.profile import TrainConfig
from drmas.train.logprobs import pack, response_logprobs
from drmas.train.workers import LocalGroup, minibatches, rank_chunks
from rows import captured_gradient, engine_rows


def test_denominators_by_hand():
    tokens = [2, 3, 1, 4, 6]
    # one rank: micro-batches [2, 3] [1, 4] [6], 3 of them, of 5, 5, 6 tokens
    assert verl_row_denominators(tokens, 2) == [15, 15, 15, 15, 18]
    # two ranks: shares [2, 3, 1] and [4, 6]; rank 0 runs [2, 3] [1], rank 1 runs [4, 6]
    assert verl_row_denominators(tokens, 2, world=2) == [20, 20, 4, 20, 20]
    # a micro-batch without response tokens counts as one token; one row per micro-batch
    assert verl_row_denominators([0, 3], 1) == [2, 6]
    assert verl_row_denominators([], 4) == []
    with pytest.raises(ValueError):
        verl_row_denominators([1], 0)


# -- a toy policy: free logits per row, float64 ---------------------------------------------
def toy_batch(seed=0, n=11, vocab=5, agents=("verifier", "searcher", "answerer")):
    g = torch.Generator().manual_seed(seed)
    rng = random.Random(seed)
    lengths = [rng.randint(1, 9) for _ in range(n)]
    width = max(lengths)
    rows = [{"agent": agents[rng.randrange(len(agents))], "T": t, "advantage": rng.uniform(-1, 1),
             "loss_weight": rng.uniform(0.5, 1.5),
             "tokens": torch.randint(vocab, (width,), generator=g),
             "old": -torch.rand(width, generator=g, dtype=torch.float64) - 0.5} for t in lengths]
    logits = torch.randn(n, width, vocab, generator=g, dtype=torch.float64, requires_grad=True)
    return rows, logits


def toy_loss(rows, logits, idx, denom=None):
    """policy_loss (entropy bonus, loss weights, dual clip) of rows `idx` as one micro-batch."""
    logp = torch.log_softmax(logits[idx], -1)
    lp = logp.gather(-1, torch.stack([rows[i]["tokens"] for i in idx])[..., None]).squeeze(-1)
    entropy = -(logp.exp() * logp).sum(-1)
    mask = torch.stack([torch.arange(lp.shape[1]) < rows[i]["T"] for i in idx]).to(lp.dtype)
    old = torch.stack([rows[i]["old"] for i in idx])
    adv = torch.tensor([rows[i]["advantage"] for i in idx], dtype=lp.dtype)
    weights = torch.tensor([rows[i]["loss_weight"] for i in idx], dtype=lp.dtype)
    return policy_loss(lp, old, adv, mask, entropy=entropy, entropy_coeff=0.01, denom=denom,
                       log_ratio_clamp=None, row_weights=weights)[0]


def upstream_loss(rows, logits, mini, micro_rows, world):
    """Upstream's layout written out: data order, contiguous shares per rank, consecutive
    micro-batches, token mean each, mean per rank, mean over ranks."""
    order = sorted(mini)
    q, r = divmod(len(order), world)
    shares, start = [], 0
    for rank in range(world):
        shares.append(order[start:start + q + (rank < r)])
        start += len(shares[-1])
    total = 0.0
    for share in shares:
        micro = [share[j:j + micro_rows] for j in range(0, len(share), micro_rows)]
        total = total + sum(toy_loss(rows, logits, m) for m in micro) / len(micro)
    return total / world


def drmas_loss(rows, logits, mini, micro_rows, world):
    """The worker's micro-batches (per agent, sorted by length, `micro_rows` rows) with the
    row denominators of upstream's layout."""
    order = sorted(mini)
    denoms = dict(zip(order, verl_row_denominators([rows[i]["T"] for i in order], micro_rows, world)))
    scale = LossOptions(loss_aggregation="verl").scale(float(sum(rows[i]["T"] for i in mini)),
                                                       row_denominators=denoms)
    total = 0.0
    for agent in ("answerer", "searcher", "verifier"):
        mine = sorted((i for i in mini if rows[i]["agent"] == agent), key=lambda i: rows[i]["T"])
        for j in range(0, len(mine), micro_rows):
            chunk = mine[j:j + micro_rows]
            total = total + toy_loss(rows, logits, chunk,
                                     denom=scale(float(sum(rows[i]["T"] for i in chunk)), chunk))
    return total


@pytest.mark.parametrize("world", [1, 2, 3])
@pytest.mark.parametrize("micro_rows", [1, 2, 4])
def test_weighted_loss_and_gradient_equal_upstreams_layout(world, micro_rows):
    rows, logits = toy_batch()
    mini = [7, 2, 9, 0, 4, 10, 5, 1, 3]                 # a shuffled mini-batch of 9 of 11 rows
    assert len({rows[i]["agent"] for i in mini}) == 3 and len({rows[i]["T"] for i in mini}) > 3
    want = upstream_loss(rows, logits, mini, micro_rows, world)
    want_grad, = torch.autograd.grad(want, logits)
    got = drmas_loss(rows, logits, mini, micro_rows, world)
    got_grad, = torch.autograd.grad(got, logits)
    assert abs(got.item() - want.item()) < 1e-6
    torch.testing.assert_close(got_grad, want_grad, atol=1e-6, rtol=0)


def test_the_workers_own_micro_batches_weigh_rows_otherwise():
    """What the layout changes: the same micro-batches with verl's per-micro-batch mean over
    drmas's own batching (each micro-batch's tokens x their count) give another gradient."""
    rows, logits = toy_batch()
    mini = [7, 2, 9, 0, 4, 10, 5, 1, 3]
    want_grad, = torch.autograd.grad(upstream_loss(rows, logits, mini, 2, 1), logits)
    chunks = []
    for agent in ("answerer", "searcher", "verifier"):
        mine = sorted((i for i in mini if rows[i]["agent"] == agent), key=lambda i: rows[i]["T"])
        chunks += [mine[j:j + 2] for j in range(0, len(mine), 2)]
    own = LossScale("verl", 0.0, n_micro=len(chunks))
    total = sum(toy_loss(rows, logits, c, denom=own(float(sum(rows[i]["T"] for i in c))))
                for c in chunks)
    own_grad, = torch.autograd.grad(total, logits)
    assert float((own_grad - want_grad).abs().max()) > 1e-3


def test_minibatch_scale_ignores_rows():
    scale = LossOptions().scale(17.0, n_micro=3)
    assert scale(5.0) == 17.0 and scale(5.0, [0, 1]) == 17.0 and isinstance(scale(5.0, [0]), float)


# -- a real worker group: tiny random model, two agents, ragged generations -------------------
def reference_first_step(group, rows, mini, chunks, denom_of):
    """The gradient of the first mini-batch: `chunks` of `mini` run one by one, each chunk's
    policy loss (entropy bonus, dual clip, no clamp) over `denom_of(chunk)`, summed."""
    s = group.settings
    group.model.zero_grad(set_to_none=True)
    group.model.train()
    for chunk in chunks:
        part = [rows[i] for i in chunk]
        ids, attn, resp = pack([r["prompt_ids"] for r in part], [r["response_ids"] for r in part],
                               group.tokenizer.pad_token_id)
        lp, ent = response_logprobs(group.model, ids, attn, s.temperature, with_entropy=True,
                                    resp=resp, entropy_grad=True)
        old = torch.zeros_like(lp)
        for b, r in enumerate(part):
            old[b][resp[b] > 0] = torch.tensor(r["logprobs"])
        adv = torch.tensor([r["advantage"] for r in part])
        loss, _ = policy_loss(lp, old, adv, resp, entropy=ent, entropy_coeff=s.entropy_coeff,
                              denom=denom_of(chunk, resp), log_ratio_clamp=None)
        loss.backward()
    grads = [p.grad.detach().clone() for p in group.params]
    group.model.zero_grad(set_to_none=True)
    group.model.eval()
    return grads


def settings(aggregation):
    return TrainConfig(ppo_mini_batches=2, micro_batch_rows=2, micro_batch_tokens=1 << 20,
                       grad_clip=1e9, entropy_coeff=0.01, loss_aggregation=aggregation,
                       log_ratio_clamp=None)


@pytest.fixture(scope="module")
def batch(tiny_model_dir):
    torch.manual_seed(0)
    group = LocalGroup("g", tiny_model_dir, ["solver", "verifier"], settings("verl"))
    rows = engine_rows(group, n=13, seed=1)
    for i, r in enumerate(rows):              # ragged responses (a random model rarely stops)
        k = 1 + (5 * i) % len(r["response_ids"])
        r["response_ids"], r["logprobs"] = r["response_ids"][:k], r["logprobs"][:k]
    mini = minibatches(len(rows), 2, seed=0)[0]
    assert len({len(rows[i]["response_ids"]) for i in mini}) > 2          # ragged
    assert len({rows[i]["agent"] for i in mini}) == 2                      # mixed agents
    return rows, mini


def test_group_update_under_verl_is_upstreams_layout(tiny_model_dir, batch):
    rows, mini = batch
    group = LocalGroup("g", tiny_model_dir, ["solver", "verifier"], settings("verl"))
    got = captured_gradient(group, rows)
    order = sorted(mini)
    upstream_chunks = [order[j:j + 2] for j in range(0, len(order), 2)]
    # agents mixed in data order: some upstream micro-batch holds both agents
    assert any(len({rows[i]["agent"] for i in c}) == 2 for c in upstream_chunks)
    want = reference_first_step(
        group, rows, mini, upstream_chunks,
        lambda chunk, resp: max(float(resp.sum()), 1.0) * len(upstream_chunks))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=1e-6, rtol=0)


def test_group_update_under_minibatch_is_unchanged(tiny_model_dir, batch):
    """`minibatch`: the worker's own micro-batches (per agent, by length) and one token
    denominator for the mini-batch, bit for bit."""
    rows, mini = batch
    group = LocalGroup("g", tiny_model_dir, ["solver", "verifier"], settings("minibatch"))
    got = captured_gradient(group, rows)
    lengths = [len(r["prompt_ids"]) + len(r["response_ids"]) for r in rows]
    chunks = [c for agent in group.agents
              for c in rank_chunks([i for i in mini if rows[i]["agent"] == agent], 0, 1, 2,
                                   lengths, 1 << 20)]
    tokens = float(sum(len(rows[i]["response_ids"]) for i in mini))
    want = reference_first_step(group, rows, mini, chunks, lambda chunk, resp: tokens)
    for g, w in zip(got, want):
        assert torch.equal(g, w)
