"""The Refiner: rewrites the draft with the Critic's feedback; its answer becomes the team's."""

from __future__ import annotations

from drmas.mas.base import Action, Agent
from drmas.rewards.math import last_boxed


class Refiner(Agent):
    """Valid when its last `\\boxed{}` can be read, like the Solver (upstream's math
    projection)."""

    name, role = "refiner", "Refiner Agent"

    def parse(self, text: str) -> Action:
        boxed = last_boxed(text)
        return Action(boxed, boxed is not None and self.format_ok(text))
