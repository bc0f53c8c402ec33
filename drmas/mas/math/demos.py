"""Warm-start demonstrations of the math MAS: (agent, chat prompt, response) triples.

Prompts come from the real agents (`Agent.prompt`; the compact prompt set for the tiny
models, the profile's for a pretrained model's warm start), so the warm-started policy sees
exactly what it will see during RL. A share of traces carries deliberate mistakes (a wrong
step, a wrong verdict, a broken format), so the warm-started policy is sometimes right and RL
has something to improve.

Rows marked `"revise": true` (the generator's `revise_demos` share, benchmarks/math.yaml) get
a revision instead: a worked draft with a slip in its last step, the Verifier re-solving it
and rejecting it, and the Solver's second, correct answer (`revise_texts`). With no marked
rows (the default) the demonstrations are the same as without the option.
"""

from __future__ import annotations

import random
from types import SimpleNamespace

from drmas.errors import DataError
from drmas.mas.base import Action, Episode, Turn
from drmas.mas.math.prompts import PROMPT_SETS
from drmas.mas.math.solver import Solver
from drmas.mas.math.verifier import Verifier
from drmas.registry import DEMONSTRATIONS

Trace = tuple[str, list[dict], str]          # (agent, prompt messages, response text)


def _need_steps(rows: list[dict]) -> None:
    """The demonstrations replay a problem's worked `steps`: only generated problems have them."""
    missing = next((r.get("id") for r in rows if not r.get("steps")), False)
    if missing is not False:
        raise DataError(f"row {missing!r} has no worked steps: math warm-start demonstrations "
                        "need generated problems (datasets with the `arithmetic` generator)")


def _fmt(steps: list[list]) -> str:
    return " ".join(f"{a} {op} {b} = {r}." for a, op, b, r in steps)


def _guess(answer: int, rng: random.Random) -> int:
    """A guess without working: right 40% of the time, else a near miss."""
    if rng.random() < 0.4:
        return answer
    return rng.choice([v for v in (answer - 10, answer - 2, answer - 1, answer + 1, answer + 2, answer + 10)
                       if v >= 0])


def _solver_text(steps: list[list], rng: random.Random, sloppy_rate: float) -> tuple[str, int]:
    """Careful (worked steps, right answer) or sloppy (a bare guess); returns (text, answer).

    The two styles are the mistakes RL can fix: a sloppy answer is wrong most of the time, so
    the policy-gradient signal concentrates on the first tokens, where the style is chosen.
    """
    answer = steps[-1][3]
    if rng.random() < sloppy_rate:
        answer = _guess(answer, rng)
        text = f"\\boxed{{{answer}}}"
    else:
        text = f"{_fmt(steps)} \\boxed{{{answer}}}"
    if rng.random() < 0.05:                     # broken format: no \boxed{}
        text = text.replace(f"\\boxed{{{answer}}}", f"The answer is {answer}.")
    return text, answer


def _verifier_text(steps: list[list], proposed: int | None, rng: random.Random,
                   sloppy_rate: float) -> str:
    """Careful (re-solve the problem, compare with the proposed answer) or sloppy (approve
    without checking)."""
    if rng.random() < sloppy_rate:
        return "<verify>approve</verify>"
    verdict = "approve" if proposed == steps[-1][3] else "reject"
    text = f"{_fmt(steps)} <verify>{verdict}</verify>"
    if rng.random() < 0.05:                     # broken format: no tag
        text = text.replace(f"<verify>{verdict}</verify>", verdict)
    return text


def revise_texts(steps: list[list], rng: random.Random) -> tuple[str, str, str]:
    """(draft, verdict, answer): a worked draft whose last result is off by 1 or 2, the
    Verifier's re-solution with `reject`, the Solver's worked, right answer."""
    a, op, b, result = steps[-1]
    wrong = rng.choice([v for v in (result - 2, result - 1, result + 1, result + 2) if v >= 0])
    draft = f"{_fmt(steps[:-1] + [[a, op, b, wrong]])} \\boxed{{{wrong}}}"
    return draft, f"{_fmt(steps)} <verify>reject</verify>", f"{_fmt(steps)} \\boxed{{{result}}}"


@DEMONSTRATIONS.register("math")
def math_traces(rows: list[dict], seed: int, mistake_rate: float, prompt_set: str = "compact",
                **_) -> list[Trace]:
    """Solver and Verifier demonstrations from generated problems that carry `steps`;
    `mistake_rate` is the share of sloppy demonstrations per agent; prompts from `prompt_set`
    (compact for the tiny models; a pretrained model's warm start uses the profile's)."""
    _need_steps(rows)
    rng = random.Random(seed)
    prompts = PROMPT_SETS[prompt_set]
    solver, verifier = Solver(prompts), Verifier(prompts)
    traces: list[Trace] = []
    for row in rows:
        ep = Episode(problem=row)
        if row.get("revise"):                   # Solver (a slip) -> Verifier (reject) -> Solver
            for loop, (agent, text) in enumerate(zip((solver, verifier, solver),
                                                     revise_texts(row["steps"], rng))):
                prompt = agent.prompt(ep)
                traces.append((agent.name, prompt, text))
                ep.turns.append(Turn(agent.name, loop // 2, prompt, SimpleNamespace(text=text),
                                     agent.parse(text)))
            continue
        for loop in range(2):
            prompt = solver.prompt(ep)
            text, answer = _solver_text(row["steps"], rng, mistake_rate if loop == 0 else mistake_rate / 2)
            traces.append(("solver", prompt, text))
            ep.turns.append(Turn("solver", loop, prompt, SimpleNamespace(text=text), Action(None, True)))
            if loop == 1:
                break
            prompt = verifier.prompt(ep)
            proposed = answer if "boxed" in text else None
            vtext = _verifier_text(row["steps"], proposed, rng, mistake_rate)
            traces.append(("verifier", prompt, vtext))
            if "reject" not in vtext:
                break
    return traces

