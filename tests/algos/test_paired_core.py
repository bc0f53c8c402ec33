"""The paired same-batch measurement's core (drmas/algos/paired.py) and the offset-only
advantages (drmas/algos/advantages.py), against plain references."""

import numpy as np
import pytest
import torch

from drmas.algos.advantages import compute_advantages, offset_advantages
from drmas.algos.paired import surrogate_grad_sq, surrogate_loss


def batch(seed=0, n_uid=3, n_traj=4):
    """Rows of a two-agent MAS (solver once, verifier once or twice per episode) with scores
    whose agent means differ from the episode means (a mean gap for the offset term)."""
    rng = np.random.default_rng(seed)
    uid, traj, agent, score = [], [], [], []
    for u in range(n_uid):
        for t in range(n_traj):
            reward = float(rng.integers(0, 2))
            for a in ["solver"] + ["verifier"] * int(rng.integers(1, 3)):
                penalty = 0.1 * float(rng.random() < 0.4) if a == "verifier" else 0.0
                uid.append(f"u{u}"), traj.append(t), agent.append(a), score.append(reward - penalty)
    return np.asarray(score), uid, traj, agent


def test_offset_advantages_against_a_plain_loop():
    score, uid, traj, agent = batch()
    got = offset_advantages(score, uid, traj, agent).numpy()
    raw = offset_advantages(score, uid, traj, agent, norm_by_std=False).numpy()
    # GRPO's advantage = (row score - mu_k) / sigma + the offset + (trajectory mean - row score) / sigma
    grpo = compute_advantages(score, uid, traj, agent).numpy()
    own = compute_advantages(score, uid, traj, agent, mean_by="agent", std_by="global").numpy()
    n = len(score)
    for i in range(n):
        mine = [j for j in range(n) if uid[j] == uid[i] and agent[j] == agent[i]]
        mu_k = np.mean(score[mine]) if len(mine) > 1 else 0.0       # a pool of one: mu = 0
        trajs = sorted({traj[j] for j in range(n) if uid[j] == uid[i]})
        means = {t: np.mean([score[j] for j in range(n) if uid[j] == uid[i] and traj[j] == t])
                 for t in trajs}
        mu, sd = np.mean(list(means.values())), np.std(list(means.values()), ddof=1)
        assert raw[i] == pytest.approx(mu_k - mu, abs=1e-6)
        assert got[i] == pytest.approx((mu_k - mu) / (sd + 1e-6), rel=1e-5, abs=1e-6)
        rest = (means[traj[i]] - score[i]) / (sd + 1e-6)
        assert grpo[i] == pytest.approx(own[i] + got[i] + rest, rel=1e-5, abs=1e-5)
    assert np.abs(got).max() > 0.1                            # the batch has a mean gap
    assert offset_advantages(score[:0], [], [], []).shape == (0,)


def orthogonal_policy(n_rows, tokens=3, width=5):
    """A policy whose row i's log-probs depend on its own parameter block only (rows' score-
    function gradients are orthogonal), every block the same start and every row the same
    tokens (so every row's gradient has the same norm)."""
    theta = torch.nn.Parameter(torch.randn(width, generator=torch.Generator().manual_seed(0))
                               .repeat(n_rows, 1))
    token_ids = torch.tensor([1, 3, 0][:tokens])

    def micro(rows):
        def get():
            logp = torch.log_softmax(theta[rows], -1)[:, token_ids]       # (B, T)
            return logp, torch.ones_like(logp), torch.tensor(rows)
        return get
    return theta, micro


def test_orthogonal_rows_give_the_ratio_of_squared_advantages():
    score, uid, traj, agent = batch(seed=1)
    sets = {"grpo": compute_advantages(score, uid, traj, agent),
            "drmas": compute_advantages(score, uid, traj, agent, mean_by="agent", std_by="agent"),
            "offset": offset_advantages(score, uid, traj, agent)}
    n = len(score)
    theta, micro = orthogonal_policy(n)
    chunks = [list(range(j, min(j + 4, n))) for j in range(0, n, 4)]      # micro-batches
    for who in ("solver", "verifier"):
        rows = [i for i in range(n) if agent[i] == who]
        mine = [micro(rows[j:j + 3]) for j in range(0, len(rows), 3)]
        sq = surrogate_grad_sq([theta], mine, sets, denom=17.0)
        a2 = {k: float(v[rows].double().pow(2).sum()) for k, v in sets.items()}
        assert sq["grpo"] / sq["drmas"] == pytest.approx(a2["grpo"] / a2["drmas"], rel=1e-6)
        assert sq["offset"] / sq["grpo"] == pytest.approx(a2["offset"] / a2["grpo"], rel=1e-6)
    assert theta.grad is None                                  # left as it was
    whole = surrogate_grad_sq([theta], [micro(c) for c in chunks], sets, denom=17.0)
    assert whole["grpo"] / whole["drmas"] == pytest.approx(
        float(sets["grpo"].pow(2).sum() / sets["drmas"].pow(2).sum()), rel=1e-6)


class Tiny(torch.nn.Module):
    """A small random next-token model: embedding -> tanh layer -> logits."""

    def __init__(self, vocab=11, width=6):
        super().__init__()
        g = torch.Generator().manual_seed(3)
        self.emb = torch.nn.Parameter(torch.randn(vocab, width, generator=g))
        self.w = torch.nn.Parameter(torch.randn(width, width, generator=g) / 2)
        self.out = torch.nn.Parameter(torch.randn(width, vocab, generator=g))

    def logprobs(self, ids):                       # (B, L) -> (B, L - 1)
        h = torch.tanh(self.emb[ids[:, :-1]] @ self.w)
        return torch.log_softmax(h @ self.out, -1).gather(-1, ids[:, 1:, None]).squeeze(-1)


def test_core_equals_direct_autograd_and_is_quadratic():
    model = Tiny()
    g = torch.Generator().manual_seed(4)
    ids = torch.randint(0, 11, (7, 6), generator=g)
    mask = (torch.rand(7, 5, generator=g) > 0.3).float()
    adv = {"a": torch.randn(7, generator=g, dtype=torch.float64),
           "b": torch.randn(7, generator=g, dtype=torch.float64)}
    weights = torch.rand(7, generator=g, dtype=torch.float64) + 0.5
    denom = float(mask.sum())
    params = list(model.parameters())
    model.w.grad = torch.full_like(model.w, 7.0)            # a gradient already there

    def micro(rows):
        return lambda: (model.logprobs(ids[rows]), mask[rows], torch.tensor(rows))

    chunks = [micro([0, 1, 2]), lambda: None, micro([3, 4]), micro([5, 6])]
    got = surrogate_grad_sq(params, chunks, adv, denom, weights)
    for name, a in adv.items():
        loss = surrogate_loss(model.logprobs(ids), mask, a, denom, weights)
        grads = torch.autograd.grad(loss, params)
        direct = float(sum(gr.double().pow(2).sum() for gr in grads))
        assert got[name] == pytest.approx(direct, rel=1e-6)
        # the same by hand: -(sum of w A logp over masked tokens) / denom
        by_hand = -(model.logprobs(ids) * mask * (weights * a).float()[:, None]).sum() / denom
        assert float(loss.detach()) == pytest.approx(float(by_hand.detach()), rel=1e-6)
    doubled = surrogate_grad_sq(params, chunks, {k: 2 * v for k, v in adv.items()}, denom, weights)
    for name in adv:
        assert doubled[name] == pytest.approx(4 * got[name], rel=1e-6)
    assert torch.equal(model.w.grad, torch.full_like(model.w, 7.0)) and model.emb.grad is None
    reduced = surrogate_grad_sq(params, chunks, adv, denom, weights,
                                reduce=lambda v: [2 * x for x in v])
    assert reduced == {k: pytest.approx(2 * v, rel=1e-9) for k, v in got.items()}
