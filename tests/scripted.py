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


def recording(outputs: dict[str, list[str]]):
    """An act() replying from per-agent output queues; records (agent, messages) per call."""
    seen = []

    def act(agent, prompts):
        seen.extend((agent, p) for p in prompts)
        return [SimpleNamespace(text=outputs[agent].pop(0)) for _ in prompts]
    return act, seen
