"""Episode stats of the four-agent math MAS (averaged into the behaviour table), their labels,
and what the team's current answer is."""

from __future__ import annotations

from drmas.mas.base import Episode

LABELS = {"solver_calls": "Solver calls / episode",
          "approved": "approved by the Verifier (%)",
          "refiner_changed": "Refiner changed the Solver's answer (%)"}
PERCENT = {"approved", "refiner_changed"}

#: the roles whose output is a full solution: the latest one is the team's answer
ANSWERING = ("solver", "refiner")


def current_answer(ep: Episode) -> str | None:
    """The latest Solver or Refiner output (upstream's `text_actions`), None before any."""
    return next((t.gen.text for t in reversed(ep.turns) if t.agent in ANSWERING), None)


def latest(ep: Episode, agent: str):
    """The latest turn of `agent` in the episode, or None."""
    return next((t for t in reversed(ep.turns) if t.agent == agent), None)


def finish(ep: Episode) -> None:
    """Final answer (the latest Solver or Refiner output) and the episode's stats."""
    ep.answer = current_answer(ep) or ""
    agents = [t.agent for t in ep.turns]
    ep.info["solver_calls"] = agents.count("solver")
    ep.info["approved"] = int(any(t.agent == "verifier" and t.action.value == "approve"
                                  for t in ep.turns))
    solved = [t.action.value for t in ep.turns if t.agent == "solver"]
    refined = [t.action.value for t in ep.turns if t.agent == "refiner"]
    ep.info["refiner_changed"] = int(bool(refined) and refined[0] != solved[0])
    ep.done = True
