"""Prompt sets of the four-agent math MAS (see drmas/mas/prompting.py).

`upstream` renders the paper's prompts: the two-agent math MAS's system prompt, environment
prompt, Solver and Verifier role prompts (unchanged upstream), the Critic's and Refiner's role
prompts, and the team context: every earlier output of the episode in order, each introduced
by its role's name, the Critic's and Verifier's with their tag's content tidied (upstream's
projection hands teammates the whole output with the tag stripped inside).
`compact` is what tiny models are trained on: the problem, the one output the role reads
(the draft, the draft and its critique, the refined solution, or the rejected answer on a
retry) and a one-line instruction.
"""

from __future__ import annotations

from drmas.mas.base import Episode
from drmas.mas.math.prompts import UPSTREAM_ENV, UPSTREAM_SOLVER, UPSTREAM_SYSTEM, UPSTREAM_VERIFIER
from drmas.mas.math4.stats import current_answer, latest
from drmas.mas.parsing import tag_tidied
from drmas.mas.prompting import OutputFormat, PromptSet

UPSTREAM_CRITIC = """
# Task Introduction
{env_prompt}

# Your Teammates' Outputs
{team_context}

# Your Role
You are a "Critic Agent". Your job is to carefully scrutinize the most recent solution proposed by your teammates (e.g. the "Solver Agent") and produce constructive, actionable feedback. Point out any incorrect reasoning steps, missing cases, computational errors, or unjustified assumptions. If you believe the solution is already correct, say so explicitly and briefly explain why.

Do NOT give a final approve/reject verdict yourself (that is the "Verifier Agent"'s job) and do NOT attempt to solve the problem yourself; only critique. A "Refiner Agent" will use your feedback to produce a revised solution.

You MUST put your critique within <critique> </critique> tags.
"""

UPSTREAM_REFINER = """
# Task Introduction
{env_prompt}

# Your Teammates' Outputs
{team_context}

# Your Role
You are a "Refiner Agent". Your job is to produce a corrected, complete solution to the math problem above by incorporating the "Critic Agent"'s feedback into the most recent solution from the "Solver Agent". If the critique identified a genuine error, fix it; if the critique was mistaken, you may keep the original reasoning but should still double check it. Write out the full, self-contained reasoning for your revised solution (do not just describe the fix).

You should give the final answer within \\boxed{{}}.
"""

ROLES = {"solver": "Solver Agent", "critic": "Critic Agent", "refiner": "Refiner Agent",
         "verifier": "Verifier Agent"}
TIDIED = {"critic": "critique", "verifier": "verify"}      # agent -> the tag teammates see tidied


def team_context(ep: Episode) -> str:
    """Every output of the episode so far as its teammates read it."""
    parts = []
    for t in ep.turns:
        shown = tag_tidied(t.gen.text, TIDIED[t.agent]) if t.agent in TIDIED else t.gen.text
        parts.append(f'\nThe output of "{ROLES[t.agent]}": {shown}\n')
    return "".join(parts)


class Upstream(PromptSet):
    name, system = "upstream", UPSTREAM_SYSTEM
    formats = {"critic": OutputFormat(no_cjk=True), "verifier": OutputFormat(no_cjk=True)}

    def _render(self, template: str, ep: Episode) -> str:
        env = UPSTREAM_ENV.format(question=ep.problem["question"])
        return template.format(env_prompt=env, team_context=team_context(ep))

    def solver(self, ep: Episode) -> str:
        return self._render(UPSTREAM_SOLVER, ep)

    def critic(self, ep: Episode) -> str:
        return self._render(UPSTREAM_CRITIC, ep)

    def refiner(self, ep: Episode) -> str:
        return self._render(UPSTREAM_REFINER, ep)

    def verifier(self, ep: Episode) -> str:
        return self._render(UPSTREAM_VERIFIER, ep)


def critique_text(ep: Episode) -> str:
    """The latest critique: its tag's content, or the whole output when it has no tag."""
    turn = latest(ep, "critic")
    if turn is None:
        return ""
    return turn.action.value if turn.action.value is not None else turn.gen.text


class Compact(PromptSet):
    name = "compact"

    def solver(self, ep: Episode) -> str:
        question, rejected = ep.problem["question"], current_answer(ep)
        if rejected is None:
            return f"Problem: {question}\nSolve it step by step. Put the answer in \\boxed{{}}."
        return (f"Problem: {question}\nRejected answer: {rejected}\n"
                f"Solve it again step by step. Put the answer in \\boxed{{}}.")

    def critic(self, ep: Episode) -> str:
        return (f"Problem: {ep.problem['question']}\nDraft: {current_answer(ep)}\n"
                f"Critique it. Put the critique in <critique></critique>.")

    def refiner(self, ep: Episode) -> str:
        return (f"Problem: {ep.problem['question']}\nDraft: {current_answer(ep)}\n"
                f"Critique: {critique_text(ep)}\n"
                f"Write the corrected solution. Put the answer in \\boxed{{}}.")

    def verifier(self, ep: Episode) -> str:
        return (f"Problem: {ep.problem['question']}\nSolution: {current_answer(ep)}\n"
                f"Check it. Reply <verify>approve</verify> or <verify>reject</verify>.")


PROMPT_SETS = {"compact": Compact(), "upstream": Upstream()}
