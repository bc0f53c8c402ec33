"""Scripted agents for the MAS tests, and the upstream texts several golden tests share.

`recording` stands in for the model, not for a component under test: the orchestras, agents,
prompt builders and parsers all run for real, and the tests compare what they sent (every
agent's messages at every turn) with templates written out by hand from upstream's code."""

from types import SimpleNamespace

# Upstream's system message and math Verifier role (agent_system/environments/prompts/).
SYSTEM = {"role": "system", "content": "You are a helpful and harmless assistant."}
MATH_VERIFIER_ROLE = (
    'You are a "Verifier Agent". Your responsibility is to critically review the most recent '
    'solution provided by the "Solver Agent". Check each reasoning step, formula, and '
    "conclusion for accuracy, completeness, and logical consistency.\n"
    "At the end of your output, you MUST provide your verdict within <verify> </verify> using "
    "exactly one of:\n"
    "(1) <verify>approve</verify> if all steps and the final answer are correct.\n"
    "(2) <verify>reject</verify> if you detect any issue.\n")

# Upstream's math team context for the problem "Compute 2 + 3 * 4." and its Solver role.
MATH_ENV = ("You are a member of an expert multi-agent team tasked with solving the math problem.\n"
            "The team's math problem is: Compute 2 + 3 * 4.\n")
SOLVER_ROLE = (
    'You are a "Solver Agent". Your job is to carefully reason through the math problem step '
    "by step and derive the correct answer. When reasoning, consider your teammates' outputs "
    "(if any) as auxiliary context. \n\nYou should give the final answer within \\boxed{}.\n")


def math_prompt(team: str, role: str) -> list[dict]:
    """An upstream math agent's messages: the system message, then the MATH_ENV task, the
    teammates' outputs `team` and the agent's `role`."""
    user = ("\n# Task Introduction\n" + MATH_ENV + "\n\n# Your Teammates' Outputs\n" + team
            + "\n\n# Your Role\n" + role)
    return [SYSTEM, {"role": "user", "content": user}]


def recording(outputs: dict[str, list[str]]):
    """An act() replying from per-agent output queues; records (agent, messages) per call."""
    seen = []

    def act(agent, prompts):
        seen.extend((agent, p) for p in prompts)
        return [SimpleNamespace(text=outputs[agent].pop(0)) for _ in prompts]
    return act, seen
