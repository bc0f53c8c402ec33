"""The search Verifier: the router. Is the information gathered so far enough to answer?"""

from __future__ import annotations

from drmas.mas.base import Action, Agent
from drmas.mas.parsing import first_tag, verdict

VERDICTS = ("yes", "no")              # in priority order: yes wins, and is the default


class Verifier(Agent):
    """`<verify>yes</verify>` anywhere (any case) routes to the Answerer; else
    `<verify>no</verify>` to the Searcher; else (no verdict) to the Answerer. Valid when a
    `<verify>` tag pair is there, whatever it holds."""

    name, role = "verifier", "Verifier Agent"

    def parse(self, text: str) -> Action:
        found = first_tag(text, "verify") is not None
        return Action(verdict(text, "verify", VERDICTS, lowercase=True),
                      found and self.format_ok(text))
