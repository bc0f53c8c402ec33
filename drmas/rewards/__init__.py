"""Outcome rewards by name: `reward(answer_text, golds) -> float` in [0, 1], registered in
`drmas.registry.REWARDS` (a benchmark file's `reward:`)."""

from __future__ import annotations

from typing import Callable

from drmas.registry import REWARDS

Reward = Callable[[str, list[str]], float]


@REWARDS.register("math")
def _math(answer: str, golds: list[str]) -> float:
    from drmas.rewards.math import score
    return max((score(answer, g) for g in golds), default=0.0)


@REWARDS.register("qa")
def _qa(answer: str, golds: list[str]) -> float:
    from drmas.rewards.qa import exact_match
    return exact_match(answer, golds)


@REWARDS.register("arithmetic")
def _arithmetic(answer: str, golds: list[str]) -> float:
    """Integer-answer tasks (generated arithmetic): the boxed answer compared as a string /
    number only (tier 1 of the math reward), so no math_verify is needed: `drmas check gpu`
    runs where it is not installed. An answer the fast tier cannot settle counts as wrong."""
    from drmas.rewards.math import _fast_verdict, last_boxed

    pred = last_boxed(answer)
    if pred is None:
        return 0.0
    for gold in golds:
        try:
            if _fast_verdict(pred, str(gold)):
                return 1.0
        except (ValueError, ZeroDivisionError):
            pass
    return 0.0


def get_reward(name: str) -> Reward:
    return REWARDS.get(name)
