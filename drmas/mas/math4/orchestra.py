"""The four-agent math MAS, as upstream's math orchestra runs it with all four roles:

    for each loop (at most `max_loop`), on the episodes not yet approved:
        Solver; on the last loop stop here (its answer is final);
        Critic (feedback on the current draft) -> Refiner (its solution becomes the team's
        answer) -> Verifier (`<verify>approve|reject</verify>`, missing = approve).

The team's answer is the latest Solver or Refiner output: a refined solution the Verifier
approves, or the last loop's Solver answer after rejections. The loop and its one option
(`max_loop`) are the two-agent math MAS's (drmas/mas/math/loop.py).
"""

from __future__ import annotations

from drmas.mas.math.loop import MathOptions, SolveReviewLoop
from drmas.mas.math.solver import Solver
from drmas.mas.math.verifier import Verifier
from drmas.mas.math4 import stats
from drmas.mas.math4.critic import Critic
from drmas.mas.math4.prompts import PROMPT_SETS
from drmas.mas.math4.refiner import Refiner
from drmas.registry import MAS

__all__ = ["MathOptions", "Math4Orchestra"]


@MAS.register("math4")
class Math4Orchestra(SolveReviewLoop):
    """Runs a batch of episodes; every agent's calls are batched across episodes."""

    name = "math4"
    agents = ("solver", "critic", "refiner", "verifier")
    prompt_sets = PROMPT_SETS
    behaviour_labels, percent_stats = stats.LABELS, stats.PERCENT
    finish = staticmethod(stats.finish)

    def roles(self, prompts):
        self.critic, self.refiner = Critic(prompts), Refiner(prompts)
        self.verifier = Verifier(prompts)
        return Solver(prompts), (self.critic, self.refiner, self.verifier)
