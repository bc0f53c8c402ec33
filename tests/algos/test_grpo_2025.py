"""`grpo_2025`, upstream's vanilla GRPO before 2026-01-28, against a direct transcription of
upstream's loop (`compute_grpo_outcome_advantage` at commit 3b556f2 of langfengQ/DrMAS, with
`group_by_agent_id=False`): torch float32 scalars in dicts of lists, a `seen_pairs` set."""

import random
from collections import defaultdict

import numpy as np
import pytest
import torch

from drmas.algos.advantages import compute_advantages, lemma_prediction
from drmas.bench.advantages import upstream_loop_advantages

EPS = 1e-6


def upstream_2025(scores, index, traj_index, epsilon=EPS, norm_adv_by_std_in_grpo=True):
    """Upstream's loop as it stood at 3b556f2, on one scalar reward per row (float32)."""
    token_level_rewards = torch.zeros(len(scores), 3)
    token_level_rewards[:, -1] = torch.tensor(scores, dtype=torch.float32)
    response_mask = torch.ones(len(scores), 3)
    scores = token_level_rewards.sum(dim=-1)
    id2score, id2mean, id2std = defaultdict(list), {}, {}
    seen_pairs = set()
    with torch.no_grad():
        for i in range(scores.shape[0]):
            if (index[i], traj_index[i]) in seen_pairs:
                continue
            id2score[index[i]].append(scores[i])
            seen_pairs.add((index[i], traj_index[i]))
        for idx, pool in id2score.items():
            if len(pool) == 1:
                id2mean[idx], id2std[idx] = torch.tensor(0.0), torch.tensor(1.0)
            else:
                id2mean[idx] = torch.mean(torch.tensor(pool))
                id2std[idx] = torch.std(torch.tensor([pool]))
        for i in range(scores.shape[0]):
            if norm_adv_by_std_in_grpo:
                scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
            else:
                scores[i] = scores[i] - id2mean[index[i]]
        scores = scores.unsqueeze(-1) * response_mask
    return scores[:, 0]


def ours(scores, uid, traj, agent, **kw):
    return compute_advantages(scores, uid, traj, agent, estimator="grpo_2025", **kw)


def test_constant_first_rows_and_a_penalised_second_agent():
    """Both trajectories right, the Verifier of the first one malformed (penalty 0.1): the
    pool holds the Solvers' 1.0 and 1.0, sd = 0, and the Verifier's row gets -0.1 / eps."""
    scores = [1.0, 0.9, 1.0, 1.0]
    uid, traj, agent = ["q"] * 4, [0, 0, 1, 1], ["solver", "verifier"] * 2
    got = ours(scores, uid, traj, agent)
    assert got.tolist() == pytest.approx([0.0, -1e5, 0.0, 0.0], rel=1e-6)
    torch.testing.assert_close(got, upstream_2025(scores, uid, traj), rtol=1e-6, atol=0)
    # today's GRPO trains both rows of the first trajectory on its mean 0.95: a bounded -0.707
    today = compute_advantages(scores, uid, traj, agent, estimator="grpo")
    assert today.tolist() == pytest.approx([-0.7071, -0.7071, 0.7071, 0.7071], abs=1e-3)


def test_the_first_row_in_batch_order_decides():
    """The same rows with the Verifier's malformed row first in its trajectory: the pool is
    (0.9, 1.0) and no row is divided by eps; `order` gives the same result on any row order."""
    scores = [0.9, 1.0, 1.0, 1.0]
    uid, traj, agent = ["q"] * 4, [0, 0, 1, 1], ["verifier", "solver", "solver", "verifier"]
    got = ours(scores, uid, traj, agent)
    sd = float(np.std([0.9, 1.0], ddof=1))
    want = [(s - 0.95) / (sd + EPS) for s in scores]
    assert got.tolist() == pytest.approx(want, rel=1e-5)
    torch.testing.assert_close(got, upstream_2025(scores, uid, traj))
    perm = [3, 1, 2, 0]                       # the rows stored in another order
    shuffled = [[col[i] for i in perm] for col in (scores, uid, traj, agent)]
    order = [perm.index(i) for i in range(4)]  # where each batch position's row now lies
    torch.testing.assert_close(ours(*shuffled, order=order), got[perm])


def test_a_pool_of_one_has_mean_zero_and_std_one():
    scores = [0.9, 1.0, 0.0]
    got = ours(scores, ["lonely", "lonely", "other"], [0, 0, 0], ["s", "v", "s"])
    assert got.tolist() == pytest.approx([0.9 / (1 + EPS), 1.0 / (1 + EPS), 0.0], rel=1e-6)
    torch.testing.assert_close(got, upstream_2025(scores, ["lonely", "lonely", "other"], [0, 0, 0]))


def test_two_draws_of_one_problem_pool_every_trajectory():
    """A problem drawn twice in a step under one uid: trajectory ids unique per drawn slot
    (the trainer's episode index) give a pool of 2n first rows."""
    scores = [1.0, 1.0, 0.0, 0.0, 1.0, 0.9, 0.0, -0.1]
    traj = [0, 0, 1, 1, 2, 2, 3, 3]
    agent = ["s", "v"] * 4
    got = ours(scores, ["q"] * 8, traj, agent)
    torch.testing.assert_close(got, upstream_2025(scores, ["q"] * 8, traj))
    pool = np.array([1.0, 0.0, 1.0, 0.0])
    want = (np.array(scores) - pool.mean()) / (pool.std(ddof=1) + EPS)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


def _random_batch(rng: random.Random):
    """Prompt groups of 1-6 trajectories, 1-4 calls each by 1-3 agents, rows interleaved in
    a random batch order; dyadic scores (penalty 0.125), exact in float32 as upstream holds."""
    rows = []
    for q in range(rng.randint(1, 5)):
        for t in range(rng.randint(1, 6)):
            team = float(rng.random() < 0.5)
            for _ in range(rng.randint(1, 4)):
                valid = rng.random() < 0.7
                rows.append((team - 0.125 * (not valid), f"u{q}", t, rng.choice("abc")))
    rng.shuffle(rows)
    return [list(col) for col in zip(*rows)]


@pytest.mark.parametrize("norm", [True, False])
def test_matches_the_transcription_on_random_batches(norm):
    rng = random.Random(7)
    for _ in range(200):
        scores, uid, traj, agent = _random_batch(rng)
        got = ours(scores, uid, traj, agent, norm_by_std=norm)
        want = upstream_2025(scores, uid, traj, norm_adv_by_std_in_grpo=norm)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        loop = upstream_loop_advantages(scores, uid, traj, agent, "first_row", "first_row", norm, EPS)
        torch.testing.assert_close(got, loop, rtol=1e-6, atol=1e-6)


def test_lemma_prediction_for_grpo_2025_reads_what_it_trains_on():
    """On the first case: grpo_2025's mean squared advantage of the Verifier is (1e5)^2 / 2
    over its two rows, the group is left out of the lemma's factor (its pool is constant),
    and today's GRPO keys are unchanged by the new estimator's presence."""
    scores = [1.0, 0.9, 1.0, 1.0]
    uid, traj, agent = ["q"] * 4, [0, 0, 1, 1], ["solver", "verifier"] * 2
    got = lemma_prediction(scores, uid, traj, agent)
    v = got["verifier"]
    assert v["grpo_2025_adv_sq"] == pytest.approx(1e10 / 2, rel=1e-5)
    assert v["lemma_factor_grpo_2025"] is None and v["lemma_rows_grpo_2025"] == 0
    assert got["solver"]["grpo_2025_adv_sq"] == 0.0
    only_grpo = lemma_prediction(scores, uid, traj, agent, estimators=["grpo"])
    for name in only_grpo:
        assert {k: got[name][k] for k in only_grpo[name]} == only_grpo[name]


def test_lemma_factor_for_grpo_2025_uses_rows_own_scores():
    """A group whose first rows spread: the factor is the mean over the agent's rows of
    ((x_i - mu) / sigma)^2 with x_i the row's own score and (mu, sigma) the first rows'."""
    scores = [1.0, 0.9, 0.0, 0.0, 1.0, 1.0]
    traj, agent = [0, 0, 1, 1, 2, 2], ["s", "v"] * 3
    got = lemma_prediction(scores, ["q"] * 6, traj, agent, estimators=["grpo_2025"])
    pool = np.array([1.0, 0.0, 1.0])
    z = (np.array([0.9, 0.0, 1.0]) - pool.mean()) / pool.std(ddof=1)
    assert got["v"]["lemma_factor_grpo_2025"] == pytest.approx(float(np.mean(z * z)))
    assert got["v"]["lemma_groups_grpo_2025"] == 1 and got["v"]["lemma_rows_grpo_2025"] == 3
    a = ours(scores, ["q"] * 6, traj, agent).numpy().astype(np.float64)
    assert got["v"]["grpo_2025_adv_sq"] == pytest.approx(float(np.mean(a[1::2] ** 2)), rel=1e-6)


def test_lemma_prediction_reads_the_batch_order_through_order():
    """Rows stored in another order with `order` give what the rows in batch order give."""
    rng = random.Random(3)
    scores, uid, traj, agent = _random_batch(rng)
    perm = list(range(len(scores)))
    rng.shuffle(perm)
    shuffled = [[col[i] for i in perm] for col in (scores, uid, traj, agent)]
    order = sorted(range(len(perm)), key=perm.__getitem__)
    want = lemma_prediction(scores, uid, traj, agent, estimators=["grpo_2025"])
    got = lemma_prediction(*shuffled, estimators=["grpo_2025"], order=order)
    for name, keys in want.items():
        assert got[name] == pytest.approx(keys, rel=1e-12, nan_ok=True)
