"""Trajectory ids of the rollout rows (drmas/train/trainer.py, `episode_rows`): unique per
drawn slot, so a problem drawn twice in one step under one GRPO group (`per_slot_uids:
false`, e.g. across an epoch boundary) pools 2n trajectories instead of merging episode j of
one draw with episode j of the other; without a repeat the grouping, and so every advantage,
is what the rollout index within the slot (e % n) gave."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from drmas.algos.advantages import compute_advantages, lemma_diagnostics
from drmas.train.schedule import group_uids
from drmas.train.trainer import episode_rows

AGENT_GROUP = {"verifier": "g", "searcher": "g", "answerer": "g"}


def episode(uid: str, agents=("answerer",), valid=True):
    turns = [SimpleNamespace(agent=a, turn=k, action=SimpleNamespace(valid=valid),
                             gen=SimpleNamespace(prompt_ids=[1], response_ids=[2], logprobs=[0.0]))
             for k, a in enumerate(agents)]
    return SimpleNamespace(problem={"uid": uid}, turns=turns)


def batch_of(drawn, n, step=0, per_slot=False, agents=lambda slot, j: ("answerer",)):
    """The step's episodes as the trainer lays them out: each slot's n rollouts in a row."""
    uids = group_uids(drawn, step, per_slot=per_slot)
    return [episode(uid, agents(slot, j)) for slot, uid in enumerate(uids) for j in range(n)]


def advantages(rows, traj=None, **kw):
    traj = [r["traj_uid"] for r in rows] if traj is None else traj
    return compute_advantages(np.asarray([r["score"] for r in rows]), [r["uid"] for r in rows],
                              traj, [r["agent"] for r in rows], **kw)


def test_a_problem_drawn_twice_pools_2n_trajectories():
    n = 2
    episodes = batch_of([{"id": "p"}, {"id": "p"}], n)           # one uid for both draws
    rows = episode_rows(episodes, [1.0, 0.0, 0.0, 0.0], 0.0, AGENT_GROUP)
    assert len({r["uid"] for r in rows}) == 1
    assert len({(r["uid"], r["traj_uid"]) for r in rows}) == 2 * n
    # four trajectories [1, 0, 0, 0]: mu 0.25, sd 0.5
    assert advantages(rows).tolist() == pytest.approx([1.5, -0.5, -0.5, -0.5], abs=1e-5)
    # what the rollout index within the slot gave: draw A's and draw B's episode j merged,
    # trajectory means [0.5, 0]; the failed episode 2 got a positive advantage
    merged = advantages(rows, traj=[e % n for e in range(4)])
    assert merged.tolist() == pytest.approx([0.7071, -0.7071, 0.7071, -0.7071], abs=1e-4)
    # Dr. MAS pools rows per (uid, agent), not trajectories: the same either way
    torch.testing.assert_close(advantages(rows, mean_by="agent", std_by="agent"),
                               torch.tensor([1.5, -0.5, -0.5, -0.5]), atol=1e-5, rtol=0)


@pytest.mark.parametrize("per_slot", [False, True])
@pytest.mark.parametrize("pools", [("global", "global"), ("agent", "agent"),
                                   ("agent", "global"), ("global", "agent")])
def test_without_a_repeat_every_advantage_is_unchanged(per_slot, pools):
    """Distinct problems, multi-turn episodes of several agents, random scores: the episode
    index and the rollout index within the slot give bit-identical advantages and diagnostics."""
    n, rng = 5, np.random.default_rng(0)
    routes = [("verifier", "answerer"), ("verifier", "searcher", "verifier", "answerer"),
              ("verifier", "searcher", "verifier", "searcher", "answerer")]

    def agents(slot, j):
        return routes[(slot + j) % 3]

    drawn = [{"id": f"q{i}"} for i in range(4)]
    episodes = batch_of(drawn, n, step=3, per_slot=per_slot, agents=agents)
    team = rng.integers(0, 2, len(episodes)).astype(float).tolist()
    rows = episode_rows(episodes, team, 0.01, AGENT_GROUP)
    old = [e % n for e, ep in enumerate(episodes) for _ in ep.turns]
    mean_by, std_by = pools
    new_adv = advantages(rows, mean_by=mean_by, std_by=std_by)
    old_adv = advantages(rows, traj=old, mean_by=mean_by, std_by=std_by)
    assert torch.equal(new_adv, old_adv)
    cols = [np.asarray([r["score"] for r in rows]), [r["uid"] for r in rows]]
    agents_col = [r["agent"] for r in rows]
    assert (lemma_diagnostics(*cols, [r["traj_uid"] for r in rows], agents_col)
            == lemma_diagnostics(*cols, old, agents_col))
