"""The engine protocol every rollout backend implements (transformers here, vLLM later)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence


@dataclass(frozen=True)
class Sampling:
    """Sampling settings of one generate call (per agent, from the config)."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 64


@dataclass
class Generation:
    """One completion. `logprobs[i]` is log p(response_ids[i]) under softmax(logits / T),
    the same quantity the trainer recomputes, so the two can be compared directly."""

    text: str
    prompt_ids: list[int]
    response_ids: list[int]
    logprobs: list[float] = field(default_factory=list)
    finished: bool = True          # False when cut by max_tokens


class Engine(Protocol):
    def generate(self, prompts: Sequence[list[int]], sampling: Sampling,
                 seed: int | None = None) -> list[Generation]: ...
