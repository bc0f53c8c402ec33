"""The math MAS (DESIGN, "Math MAS"): Solver -> Verifier -> Solver again if rejected.

max_loop 2 means at most two Solver calls; the Verifier is skipped on the last loop, so a
second Solver answer is final. A missing verdict counts as approve (and as invalid format).
"""

from __future__ import annotations

from drmas.agents.base import Act, Action, Agent, Episode, call, parse_verdict
from drmas.agents.registry import register, register_orchestra
from drmas.rewards.math import last_boxed

VERDICTS = ("approve", "reject")


def solver_attempts(episode: Episode) -> list[str]:
    return [t.gen.text for t in episode.turns if t.agent == "solver"]


@register("solver")
class Solver(Agent):
    name = "solver"

    def user_text(self, episode: Episode) -> str:
        question = episode.problem["question"]
        attempts = solver_attempts(episode)
        if not attempts:
            return f"Problem: {question}\nSolve it step by step. Put the answer in \\boxed{{}}."
        return (f"Problem: {question}\nRejected answer: {attempts[-1]}\n"
                f"Solve it again step by step. Put the answer in \\boxed{{}}.")

    def parse(self, text: str) -> Action:
        boxed = last_boxed(text)
        return Action(boxed, boxed is not None)


@register("verifier")
class Verifier(Agent):
    name = "verifier"

    def user_text(self, episode: Episode) -> str:
        return (f"Problem: {episode.problem['question']}\nSolution: {solver_attempts(episode)[-1]}\n"
                f"Check it. Reply <verify>approve</verify> or <verify>reject</verify>.")

    def parse(self, text: str) -> Action:
        return parse_verdict(text, VERDICTS, default="approve")


@register_orchestra("math")
class MathOrchestra:
    """Runs a batch of math episodes; every agent's calls are batched across episodes."""

    agents = ("solver", "verifier")

    def __init__(self, max_loop: int = 2, **_):
        if max_loop < 1:
            raise ValueError("max_loop must be >= 1")
        self.max_loop = max_loop
        self.solver, self.verifier = Solver(), Verifier()

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
            ep.answer = solver_attempts(ep)[-1]
            ep.info["solver_calls"] = len(solver_attempts(ep))
            ep.done = True
        return episodes
