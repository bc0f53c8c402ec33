"""Episode stats of the math MAS (averaged into the behaviour table) and their labels."""

from __future__ import annotations

from drmas.mas.base import Episode
from drmas.mas.math.solver import solver_attempts

LABELS = {"solver_calls": "Solver calls / episode"}
PERCENT: set[str] = set()


def finish(ep: Episode) -> None:
    """Final answer (the last Solver output) and the episode's stats."""
    attempts = solver_attempts(ep)
    ep.answer = attempts[-1]
    ep.info["solver_calls"] = len(attempts)
    ep.done = True
