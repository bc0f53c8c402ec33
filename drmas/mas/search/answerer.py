"""The Answerer: answers the question from the information gathered."""

from __future__ import annotations

from drmas.mas.base import Action, Agent
from drmas.mas.parsing import first_tag


class Answerer(Agent):
    """The answer is the first `<answer>` tag's stripped content; without a tag there is
    no answer and the episode goes on. Valid when the tag pair is there and the output has
    its prompt set's format; a tagged answer ends the episode either way, as upstream."""

    name, role = "answerer", "Answer Agent"

    def parse(self, text: str) -> Action:
        span = first_tag(text, "answer")
        if span is None:
            return Action(None, False)
        return Action(span.content, self.format_ok(text))
