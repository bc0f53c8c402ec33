"""The Searcher: writes one query for the search engine."""

from __future__ import annotations

from drmas.mas.base import Action, Agent
from drmas.mas.parsing import first_tag


class Searcher(Agent):
    """The query is the first `<search>` tag's stripped content (None without a tag, and
    then nothing is searched). Valid when the tag pair is there (even empty) and the output
    has its prompt set's format; an invalid output with a tag still searches, as upstream."""

    name, role = "searcher", "Search Agent"

    def parse(self, text: str) -> Action:
        span = first_tag(text, "search")
        if span is None:
            return Action(None, False)
        return Action(span.content, self.format_ok(text))
