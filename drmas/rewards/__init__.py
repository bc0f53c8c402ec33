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


def get_reward(name: str) -> Reward:
    return REWARDS.get(name)
