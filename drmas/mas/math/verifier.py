"""The math Verifier: reviews the latest solution and approves or rejects it."""

from __future__ import annotations

from drmas.mas.base import Action, Agent
from drmas.mas.parsing import first_tag, verdict

VERDICTS = ("approve", "reject")      # in priority order: approve wins, and is the default


class Verifier(Agent):
    """`<verify>approve</verify>` anywhere approves (case-sensitive, as upstream); else
    `<verify>reject</verify>` rejects; else (no verdict) approves. Valid when a `<verify>`
    tag pair is there, whatever it holds."""

    name, role = "verifier", "Verifier Agent"

    def parse(self, text: str) -> Action:
        found = first_tag(text, "verify") is not None
        return Action(verdict(text, "verify", VERDICTS, lowercase=False),
                      found and self.format_ok(text))
