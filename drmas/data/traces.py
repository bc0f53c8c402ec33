"""Warm-start demonstrations: (chat prompt, response) pairs for each agent of a suite.

Prompts come from the real agents (`Agent.prompt`), so the warm-started policy sees exactly
what it will see during RL. A share of traces carries deliberate mistakes (a wrong step, a
wrong verdict, a broken format), so the warm-started policy is sometimes right and RL has
something to improve.
"""

from __future__ import annotations

import random
from types import SimpleNamespace

from drmas.agents.base import Action, Episode, Turn
from drmas.agents.math import Solver, Verifier

Trace = tuple[str, list[dict], str]          # (agent, prompt messages, response text)


def _fmt(steps: list[list]) -> str:
    return " ".join(f"{a} {op} {b} = {r}." for a, op, b, r in steps)


def _with_mistake(steps: list[list], rng: random.Random) -> list[list]:
    """Perturb one step's result; later steps carry the wrong value forward correctly."""
    bad = [list(s) for s in steps]
    k = rng.randrange(len(bad))
    right = bad[k][3]
    bad[k][3] = rng.choice([v for v in (right - 10, right - 2, right - 1, right + 1, right + 2, right + 10) if v >= 0])
    for j in range(k + 1, len(bad)):
        a, op, b, _ = bad[j]
        bad[j][0] = bad[j - 1][3]
        bad[j][3] = bad[j][0] + b if op == "+" else bad[j][0] - b if op == "-" else bad[j][0] * b
    return bad


def _solver_text(steps: list[list], rng: random.Random, mistake_rate: float) -> tuple[str, bool]:
    wrong = rng.random() < mistake_rate
    shown = _with_mistake(steps, rng) if wrong else steps
    answer = shown[-1][3]
    if rng.random() < 0.05:                     # broken format: no \boxed{}
        return f"{_fmt(shown)} The answer is {answer}.", not wrong
    return f"{_fmt(shown)} \\boxed{{{answer}}}", not wrong


def _verifier_text(steps_shown: list[list], correct: bool, rng: random.Random,
                   mistake_rate: float) -> str:
    """Recompute each shown step; reject if any differs (with a share of flipped verdicts)."""
    checks = " ".join(f"{a} {op} {b} = {a + b if op == '+' else a - b if op == '-' else a * b}."
                      for a, op, b, _ in steps_shown)
    verdict = "approve" if correct else "reject"
    if rng.random() < mistake_rate / 2:
        verdict = "reject" if verdict == "approve" else "approve"
    if rng.random() < 0.05:                     # broken format: no tag
        return f"{checks} {verdict}"
    return f"{checks} <verify>{verdict}</verify>"


def math_traces(rows: list[dict], seed: int, mistake_rate: float, **_) -> list[Trace]:
    """Solver and Verifier demonstrations from generated problems that carry `steps`."""
    rng = random.Random(seed)
    solver, verifier = Solver(), Verifier()
    traces: list[Trace] = []
    for row in rows:
        ep = Episode(problem=row)
        for loop in range(2):
            prompt = solver.prompt(ep)
            text, correct = _solver_text(row["steps"], rng, mistake_rate if loop == 0 else mistake_rate / 2)
            traces.append(("solver", prompt, text))
            ep.turns.append(Turn("solver", loop, prompt, SimpleNamespace(text=text), Action(None, True)))
            if loop == 1:
                break
            prompt = verifier.prompt(ep)
            shown = _parse_steps(text)
            vtext = _verifier_text(shown, correct and bool(shown), rng, mistake_rate)
            traces.append(("verifier", prompt, vtext))
            if correct and rng.random() < 0.7:  # most correct episodes end after one loop
                break
    return traces


def _parse_steps(text: str) -> list[list]:
    """The `a op b = r.` steps written in a Solver response."""
    import re
    return [[int(a), op, int(b), int(r)]
            for a, op, b, r in re.findall(r"(\d+) ([-+*]) (\d+) = (-?\d+)\.", text)]


def _search_traces(rows, seed, mistake_rate, retriever=None, **_):
    from drmas.data.search_traces import search_traces
    return search_traces(rows, seed=seed, mistake_rate=mistake_rate, retriever=retriever)


TRACE_BUILDERS = {"math": math_traces, "search": _search_traces}
