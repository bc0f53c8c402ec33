"""Warm-start demonstrations of the four-agent math MAS: (agent, chat prompt, response).

Episodes are played through with the real agents' compact prompts, in the orchestra's order
(Solver -> Critic -> Refiner -> Verifier, then the Solver again after a rejection), so a
tiny model warm-started on them sees exactly the prompts RL will show it, in every role it
plays. Each role is careful or sloppy (`mistake_rate` sloppy demonstrations per role) so the
warm-started team is sometimes right and RL has something to improve:

- Solver: worked steps and the right answer, or a bare guess (the two-agent MAS's traces);
- Critic: re-works the steps and says whether the draft's answer is right (naming the right
  one when not), or waves the draft through without checking;
- Refiner: re-works the steps and boxes the right answer, or copies the draft's answer;
- Verifier: re-works the steps and judges the refined answer, or approves unchecked.
About 5% of demonstrations break their format (no tag, no box).
"""

from __future__ import annotations

import random
from types import SimpleNamespace

from drmas.mas.base import Episode, Turn
from drmas.mas.math.demos import _fmt, _solver_text, _verifier_text
from drmas.mas.math.loop import MathOptions
from drmas.mas.math.solver import Solver
from drmas.mas.math.verifier import Verifier
from drmas.mas.math4.critic import Critic
from drmas.mas.math4.prompts import PROMPT_SETS
from drmas.mas.math4.refiner import Refiner
from drmas.registry import DEMONSTRATIONS
from drmas.rewards.math import last_boxed

Trace = tuple[str, list[dict], str]          # (agent, prompt messages, response text)
BROKEN_RATE = 0.05


def _answer(text: str) -> int | None:
    boxed = last_boxed(text)
    return int(boxed) if boxed is not None and boxed.lstrip("-").isdigit() else None


def _critic_text(steps: list[list], draft: int | None, rng: random.Random, sloppy_rate: float) -> str:
    if rng.random() < sloppy_rate:
        text = "<critique>Right.</critique>"
    else:
        right = steps[-1][3]
        verdict = "Right." if draft == right else f"It is {right}."
        text = f"{_fmt(steps)} <critique>{verdict}</critique>"
    if rng.random() < BROKEN_RATE:
        text = text.replace("<critique>", "").replace("</critique>", "")
    return text


def _refiner_text(steps: list[list], draft: int | None, rng: random.Random,
                  sloppy_rate: float) -> str:
    if rng.random() < sloppy_rate and draft is not None:
        text = f"\\boxed{{{draft}}}"
    else:
        text = f"{_fmt(steps)} \\boxed{{{steps[-1][3]}}}"
    if rng.random() < BROKEN_RATE:
        text = text.replace("\\boxed{", "The answer is {")
    return text


def _play(ep: Episode, agent, text: str, loop: int, traces: list[Trace]) -> None:
    """Record a demonstration and append it to the episode, as the orchestra would."""
    prompt = agent.prompt(ep)
    traces.append((agent.name, prompt, text))
    ep.turns.append(Turn(agent.name, loop, prompt, SimpleNamespace(text=text), agent.parse(text)))


@DEMONSTRATIONS.register("math4")
def math4_traces(rows: list[dict], seed: int, mistake_rate: float,
                 options: MathOptions = MathOptions(), prompt_set: str = "compact",
                 **_) -> list[Trace]:
    """Demonstrations of all four roles from generated problems that carry `steps`, in the
    prompts of `prompt_set`, looped as the orchestra (`options.max_loop`)."""
    max_loop = options.max_loop
    rng = random.Random(seed)
    prompts = PROMPT_SETS[prompt_set]
    solver, critic = Solver(prompts), Critic(prompts)
    refiner, verifier = Refiner(prompts), Verifier(prompts)
    traces: list[Trace] = []
    for row in rows:
        steps, ep = row["steps"], Episode(problem=row)
        for loop in range(max_loop):
            text, _ = _solver_text(steps, rng, mistake_rate if loop == 0 else mistake_rate / 2)
            _play(ep, solver, text, loop, traces)
            if loop == max_loop - 1:
                break
            _play(ep, critic, _critic_text(steps, _answer(text), rng, mistake_rate), loop, traces)
            refined = _refiner_text(steps, _answer(text), rng, mistake_rate)
            _play(ep, refiner, refined, loop, traces)
            _play(ep, verifier, _verifier_text(steps, _answer(refined), rng, mistake_rate), loop, traces)
            if ep.turns[-1].action.value != "reject":
                break
    return traces
