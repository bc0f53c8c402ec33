"""The `single` math MAS: the math Solver alone, one call per episode.

A single-agent workload through the same trainer, for `drmas perf step`: the peer it is timed
against (TRL's GRPOTrainer) trains one policy on one completion per sample. It shares the
math MAS's prompts, parsing and stats.
"""

from __future__ import annotations

from drmas.mas.base import Act, Episode, NoOptions, call
from drmas.mas.math import stats
from drmas.mas.math.prompts import PROMPT_SETS
from drmas.mas.math.solver import Solver
from drmas.mas.prompting import pick
from drmas.registry import MAS


@MAS.register("single")
class SingleOrchestra:
    agents = ("solver",)
    prompt_sets = PROMPT_SETS
    behaviour_labels, percent_stats = stats.LABELS, stats.PERCENT
    options_class = NoOptions               # no options of its own

    def __init__(self, options: NoOptions = NoOptions(), *, prompt_set: str = "compact",
                 retriever=None):
        self.options = options
        self.solver = Solver(pick(PROMPT_SETS, prompt_set, "single"))

    def run(self, problems: list[dict], act: Act) -> list[Episode]:
        episodes = [Episode(problem=p) for p in problems]
        call(act, self.solver, episodes, turn=0)
        for ep in episodes:
            stats.finish(ep)
        return episodes
