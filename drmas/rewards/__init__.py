"""Outcome rewards by name: `reward(answer_text, golds) -> float` in [0, 1]."""

from __future__ import annotations

from typing import Callable

from drmas.errors import ConfigError

Reward = Callable[[str, list[str]], float]


def _math(answer: str, golds: list[str]) -> float:
    from drmas.rewards.math import score
    return max((score(answer, g) for g in golds), default=0.0)


def _qa(answer: str, golds: list[str]) -> float:
    from drmas.rewards.qa import exact_match
    return exact_match(answer, golds)


REWARDS: dict[str, Reward] = {"math": _math, "qa": _qa}


def get_reward(name: str) -> Reward:
    if name not in REWARDS:
        raise ConfigError(f"unknown reward {name!r}; known: {', '.join(REWARDS)}")
    return REWARDS[name]
