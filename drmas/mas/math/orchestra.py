"""The math MAS (ARCHITECTURE.md, "Math MAS"): Solver -> Verifier -> Solver again if rejected.

As in the paper's code, `max_loop` (its one option, `MathOptions`) bounds the Solver calls;
the Verifier is skipped on the last loop, so a second Solver answer is final, and a missing
verdict approves. The loop is the one the four-agent MAS runs too (loop.py).
"""

from __future__ import annotations

from drmas.mas.math import stats
from drmas.mas.math.loop import MathOptions, SolveReviewLoop
from drmas.mas.math.prompts import PROMPT_SETS
from drmas.mas.math.solver import Solver
from drmas.mas.math.verifier import Verifier
from drmas.registry import MAS

__all__ = ["MathOptions", "MathOrchestra"]


@MAS.register("math")
class MathOrchestra(SolveReviewLoop):
    """Runs a batch of math episodes; every agent's calls are batched across episodes."""

    name = "math"
    agents = ("solver", "verifier")
    prompt_sets = PROMPT_SETS
    behaviour_labels, percent_stats = stats.LABELS, stats.PERCENT
    finish = staticmethod(stats.finish)

    def roles(self, prompts):
        self.verifier = Verifier(prompts)
        return Solver(prompts), (self.verifier,)
