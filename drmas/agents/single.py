"""The `single` math MAS: the Solver alone, one call per episode.

A single-agent workload through the same trainer, for `drmas perf step`: the peer it is timed
against (TRL's GRPOTrainer) trains one policy on one completion per sample.
"""

from __future__ import annotations

from drmas.agents.base import Act, Episode, call
from drmas.agents.math import Solver, solver_attempts
from drmas.agents.registry import register_orchestra


@register_orchestra("single")
class SingleOrchestra:
    agents = ("solver",)

    def __init__(self, **_):
        self.solver = Solver()

    def run(self, problems: list[dict], act: Act) -> list[Episode]:
        episodes = [Episode(problem=p) for p in problems]
        call(act, self.solver, episodes, turn=0)
        for ep in episodes:
            ep.answer = solver_attempts(ep)[-1]
            ep.info["solver_calls"] = 1
            ep.done = True
        return episodes
