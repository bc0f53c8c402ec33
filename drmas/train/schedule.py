"""How a run's steps and GRPO groups are laid out over the training data.

`steps_for_epochs` turns the paper's `trainer.total_epochs` into a step count the way verl
does (the dataloader drops the last incomplete batch of every epoch). `group_uids` names the
GRPO group of every rollout slot of a step: by default the problem and the step (a problem
drawn twice in one step, possible across an epoch boundary, then pools its 2n rollouts);
`per_slot=True` gives every drawn slot its own group, as upstream does.
"""

from __future__ import annotations

from drmas.errors import ConfigError


def steps_for_epochs(n_problems: int, prompts_per_step: int, epochs: int) -> int:
    """Training steps of `epochs` passes over `n_problems` problems, `prompts_per_step` per
    step, each epoch's last incomplete batch dropped (verl: len(dataloader) * total_epochs)."""
    if prompts_per_step < 1 or epochs < 0:
        raise ConfigError(f"prompts_per_step must be >= 1 and epochs >= 0, got "
                          f"{prompts_per_step} and {epochs}")
    if n_problems < prompts_per_step and epochs:
        raise ConfigError(f"{n_problems} training problems cannot fill one step of "
                          f"{prompts_per_step} prompts")
    return (n_problems // prompts_per_step) * epochs


def group_uids(problems: list[dict], step: int, per_slot: bool = False) -> list[str]:
    """The GRPO group id of each problem drawn for `step` (before its n rollouts)."""
    if per_slot:
        return [f"{p['id']}@{step}#{slot}" for slot, p in enumerate(problems)]
    return [f"{p['id']}@{step}" for p in problems]
