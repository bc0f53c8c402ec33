"""The math Solver: reasons step by step and puts its answer in `\\boxed{}`."""

from __future__ import annotations

from drmas.mas.base import Action, Agent, Episode
from drmas.rewards.math import last_boxed


def solver_attempts(episode: Episode) -> list[str]:
    """The Solver's outputs so far, oldest first."""
    return [t.gen.text for t in episode.turns if t.agent == "solver"]


class Solver(Agent):
    """Valid when its last `\\boxed{}` can be read (the answer the reward is computed on)."""

    name, role = "solver", "Solver Agent"

    def parse(self, text: str) -> Action:
        boxed = last_boxed(text)
        return Action(boxed, boxed is not None and self.format_ok(text))
