"""The math MAS (ARCHITECTURE.md, "Math MAS"): Solver -> Verifier -> Solver again if rejected.

As in the paper's code, `max_loop` bounds the Solver calls; the Verifier is skipped on the
last loop, so a second Solver answer is final, and a missing verdict approves.
"""

from __future__ import annotations

from drmas.mas.base import Act, Episode, call
from drmas.mas.math import stats
from drmas.mas.math.prompts import PROMPT_SETS
from drmas.mas.math.solver import Solver
from drmas.mas.math.verifier import Verifier
from drmas.mas.prompting import pick
from drmas.registry import MAS


@MAS.register("math")
class MathOrchestra:
    """Runs a batch of math episodes; every agent's calls are batched across episodes."""

    agents = ("solver", "verifier")
    prompt_sets = PROMPT_SETS
    behaviour_labels, percent_stats = stats.LABELS, stats.PERCENT

    def __init__(self, max_loop: int = 2, prompt_set: str = "compact", **_):
        if max_loop < 1:
            raise ValueError("max_loop must be >= 1")
        self.max_loop = max_loop
        prompts = pick(PROMPT_SETS, prompt_set, "math")
        self.solver, self.verifier = Solver(prompts), Verifier(prompts)

    def run(self, problems: list[dict], act: Act) -> list[Episode]:
        episodes = [Episode(problem=p) for p in problems]
        active = episodes
        for loop in range(self.max_loop):
            call(act, self.solver, active, turn=loop)
            if loop == self.max_loop - 1:
                break
            verdicts = call(act, self.verifier, active, turn=loop)
            active = [ep for ep, v in zip(active, verdicts) if v.value == "reject"]
        for ep in episodes:
            stats.finish(ep)
        return episodes
