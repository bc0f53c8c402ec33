"""Prompt sets of the math MAS (see drmas/mas/prompting.py).

`upstream` renders the paper's prompts: the system prompt, the environment prompt with the
problem, the team context (every earlier output of this episode, in order, each introduced
by its role's name: a retried Solver so reads the Verifier's critique) and the role prompt.
`compact` is what the tiny default models are trained on: the problem, the rejected answer
on a retry, and a one-line instruction.
"""

from __future__ import annotations

from drmas.mas.base import Episode
from drmas.mas.math.solver import solver_attempts
from drmas.mas.parsing import tag_tidied
from drmas.mas.prompting import OutputFormat, PromptSet

UPSTREAM_SYSTEM = "You are a helpful and harmless assistant."

UPSTREAM_ENV = """You are a member of an expert multi-agent team tasked with solving the math problem.
The team's math problem is: {question}
"""

UPSTREAM_SOLVER = """
# Task Introduction
{env_prompt}

# Your Teammates' Outputs
{team_context}

# Your Role
You are a "Solver Agent". Your job is to carefully reason through the math problem step by step and derive the correct answer. When reasoning, consider your teammates' outputs (if any) as auxiliary context. 

You should give the final answer within \\boxed{{}}.
"""

UPSTREAM_VERIFIER = """
# Task Introduction
{env_prompt}

# Your Teammates' Outputs
{team_context}

# Your Role
You are a "Verifier Agent". Your responsibility is to critically review the most recent solution provided by the "Solver Agent". Check each reasoning step, formula, and conclusion for accuracy, completeness, and logical consistency.
At the end of your output, you MUST provide your verdict within <verify> </verify> using exactly one of:
(1) <verify>approve</verify> if all steps and the final answer are correct.
(2) <verify>reject</verify> if you detect any issue.
"""

ROLES = {"solver": "Solver Agent", "verifier": "Verifier Agent"}


def team_context(ep: Episode) -> str:
    """Every output of the episode so far as its teammates read it: the Solver's in full,
    the Verifier's with its verdict tag tidied (upstream's projection)."""
    parts = []
    for t in ep.turns:
        shown = tag_tidied(t.gen.text, "verify") if t.agent == "verifier" else t.gen.text
        parts.append(f'\nThe output of "{ROLES[t.agent]}": {shown}\n')
    return "".join(parts)


class Upstream(PromptSet):
    name, system = "upstream", UPSTREAM_SYSTEM
    formats = {"verifier": OutputFormat(no_cjk=True)}

    def _render(self, template: str, ep: Episode) -> str:
        env = UPSTREAM_ENV.format(question=ep.problem["question"])
        return template.format(env_prompt=env, team_context=team_context(ep))

    def solver(self, ep: Episode) -> str:
        return self._render(UPSTREAM_SOLVER, ep)

    def verifier(self, ep: Episode) -> str:
        return self._render(UPSTREAM_VERIFIER, ep)


class Compact(PromptSet):
    name = "compact"

    def solver(self, ep: Episode) -> str:
        question, attempts = ep.problem["question"], solver_attempts(ep)
        if not attempts:
            return f"Problem: {question}\nSolve it step by step. Put the answer in \\boxed{{}}."
        return (f"Problem: {question}\nRejected answer: {attempts[-1]}\n"
                f"Solve it again step by step. Put the answer in \\boxed{{}}.")

    def verifier(self, ep: Episode) -> str:
        return (f"Problem: {ep.problem['question']}\nSolution: {solver_attempts(ep)[-1]}\n"
                f"Check it. Reply <verify>approve</verify> or <verify>reject</verify>.")


class Smol(PromptSet):
    """For a small pretrained chat model (SmolLM2-135M-Instruct): upstream's information
    (the problem; on a retry, the rejected solution and the Verifier's critique) without its
    team framing and role text, which a 135M model tends to answer instead of the problem.
    The problem comes first, then one instruction that names the output line. No system
    message: the model's chat template supplies its own. The answer line is shown with a
    placeholder, not a number (with `\\boxed{42}` as the example, the model answered 42).
    Control flow, tags and extraction are upstream's."""

    name = "smol"
    solve = ("Solve the problem step by step. End with the line: The final answer is "
             "\\boxed{ANSWER}, where ANSWER is your result.")

    def solver(self, ep: Episode) -> str:
        question, attempts = ep.problem["question"], solver_attempts(ep)
        if not attempts:
            return f"{question}\n\n{self.solve}"
        critique = [tag_tidied(t.gen.text, "verify") for t in ep.turns if t.agent == "verifier"]
        said = f"\n\nThe checker said:\n{critique[-1]}" if critique else ""
        return (f"{question}\n\nThis solution was checked and rejected:\n{attempts[-1]}{said}\n\n"
                f"{self.solve}")

    def verifier(self, ep: Episode) -> str:
        return (f"Problem: {ep.problem['question']}\n\nSolution: {solver_attempts(ep)[-1]}\n\n"
                "Is this solution correct? Reply with one line: <verify>approve</verify> if it "
                "is correct, <verify>reject</verify> if it is wrong.")


PROMPT_SETS = {"compact": Compact(), "upstream": Upstream(), "smol": Smol()}
