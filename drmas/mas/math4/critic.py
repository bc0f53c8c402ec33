"""The Critic: reviews the current draft and writes feedback in `<critique>`, no verdict."""

from __future__ import annotations

from drmas.mas.base import Action, Agent
from drmas.mas.parsing import first_tag


class Critic(Agent):
    """Reads its first `<critique>` ... `</critique>` (content stripped), as upstream's
    projection does; valid when that tag pair is there (and, under the upstream prompt set,
    the output has no CJK characters). Teammates read the whole output, tag tidied."""

    name, role = "critic", "Critic Agent"

    def parse(self, text: str) -> Action:
        span = first_tag(text, "critique")
        return Action(span.content if span else None, span is not None and self.format_ok(text))
