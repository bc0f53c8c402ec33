"""Epochs -> steps as verl counts them, and GRPO group ids per step (shared vs per slot)."""

import numpy as np
import pytest

from drmas.algos.advantages import compute_advantages
from drmas.errors import ConfigError
from drmas.train.schedule import group_uids, steps_for_epochs


@pytest.mark.parametrize("n,per_step,epochs,steps", [
    (1000, 32, 2, 62),        # 31 full batches per epoch (the last 8 problems are dropped)
    (1024, 32, 2, 64),
    (169615, 128, 1, 1325),   # Search-R1's NQ + HotpotQA train split, the paper's search batch
    (32, 32, 0, 0),
])
def test_steps_for_epochs(n, per_step, epochs, steps):
    assert steps_for_epochs(n, per_step, epochs) == steps


def test_steps_for_epochs_rejects_what_cannot_run():
    with pytest.raises(ConfigError, match="10 training problems cannot fill one step of 32"):
        steps_for_epochs(10, 32, 1)
    with pytest.raises(ConfigError, match="prompts_per_step must be >= 1"):
        steps_for_epochs(10, 0, 1)


def test_a_problem_drawn_twice_in_a_step():
    drawn = [{"id": "p"}, {"id": "q"}, {"id": "p"}]          # e.g. across an epoch boundary
    assert group_uids(drawn, 7) == ["p@7", "q@7", "p@7"]
    assert group_uids(drawn, 7, per_slot=True) == ["p@7#0", "q@7#1", "p@7#2"]


def test_per_slot_groups_keep_the_two_draws_apart():
    """n = 2 rollouts per slot, one row each; the trainer's traj_uid is the episode's index
    in the step's batch (trainer.episode_rows), unique per drawn slot."""
    drawn = [{"id": "p"}, {"id": "p"}]
    scores = np.array([1.0, 0.0, 1.0, 1.0])        # first draw: 1, 0; second draw: 1, 1
    traj = [0, 1, 2, 3]

    def advantages(per_slot):
        uids = [u for u in group_uids(drawn, 0, per_slot) for _ in range(2)]
        return compute_advantages(scores, uids, traj, ["a"] * 4, norm_by_std=False).tolist()

    # shared: one group of the four trajectories of both draws (baseline 0.75)
    assert advantages(False) == pytest.approx([0.25, -0.75, 0.25, 0.25])
    # per slot: the first draw's baseline is 0.5, the second draw carries no signal
    assert advantages(True) == pytest.approx([0.5, -0.5, 0.0, 0.0])
