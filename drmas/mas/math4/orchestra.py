"""The four-agent math MAS, as upstream's math orchestra runs it with all four roles:

    for each loop (at most `max_loop`), on the episodes not yet approved:
        Solver; on the last loop stop here (its answer is final);
        Critic (feedback on the current draft) -> Refiner (its solution becomes the team's
        answer) -> Verifier (`<verify>approve|reject</verify>`, missing = approve).

The team's answer is the latest Solver or Refiner output: a refined solution the Verifier
approves, or the last loop's Solver answer after rejections.
"""

from __future__ import annotations

from drmas.mas.base import Act, Episode, call
from drmas.mas.math.solver import Solver
from drmas.mas.math.verifier import Verifier
from drmas.mas.math4 import stats
from drmas.mas.math4.critic import Critic
from drmas.mas.math4.prompts import PROMPT_SETS
from drmas.mas.math4.refiner import Refiner
from drmas.mas.prompting import pick
from drmas.registry import MAS


@MAS.register("math4")
class Math4Orchestra:
    """Runs a batch of episodes; every agent's calls are batched across episodes."""

    agents = ("solver", "critic", "refiner", "verifier")
    prompt_sets = PROMPT_SETS
    behaviour_labels, percent_stats = stats.LABELS, stats.PERCENT

    def __init__(self, max_loop: int = 2, prompt_set: str = "compact", **_):
        if max_loop < 1:
            raise ValueError("max_loop must be >= 1")
        self.max_loop = max_loop
        prompts = pick(PROMPT_SETS, prompt_set, "math4")
        self.solver, self.critic = Solver(prompts), Critic(prompts)
        self.refiner, self.verifier = Refiner(prompts), Verifier(prompts)

    def run(self, problems: list[dict], act: Act) -> list[Episode]:
        episodes = [Episode(problem=p) for p in problems]
        active = episodes
        for loop in range(self.max_loop):
            call(act, self.solver, active, turn=loop)
            if loop == self.max_loop - 1:
                break
            call(act, self.critic, active, turn=loop)
            call(act, self.refiner, active, turn=loop)
            verdicts = call(act, self.verifier, active, turn=loop)
            active = [ep for ep, v in zip(active, verdicts) if v.value == "reject"]
        for ep in episodes:
            stats.finish(ep)
        return episodes
