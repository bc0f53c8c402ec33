"""The engine protocol every rollout backend implements (transformers: `hf.py`; vLLM:
`vllm.py`; chosen per model by `engines.make_engine`).

A worker group talks to its engine through these calls only: it never reaches into the
engine's model. After each optimiser step the group pushes its new weights with
`update_weights` (no restart, no disk); while it trains, `sleep` frees the engine's device
memory and `wake` brings it back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Protocol, Sequence

if TYPE_CHECKING:       # annotations only: a job that runs no model (tokenizer) loads no torch
    import torch


@dataclass(frozen=True)
class Sampling:
    """Sampling settings of one generate call (per agent, from the config).

    temperature <= 0 means greedy; the logprobs reported are then those of softmax(logits).
    """

    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 64

    def __post_init__(self):
        # the config's bounds (drmas/config/profile.py), for callers that build one directly:
        # top_p 0 would keep no token, and max_tokens 0 would decode nothing
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {self.max_tokens}")


@dataclass
class Generation:
    """One completion. `logprobs[i]` is log p(response_ids[i]) under softmax(logits / T)
    (T = 1 when greedy), the same quantity the trainer recomputes, so the two can be
    compared directly."""

    text: str
    prompt_ids: list[int]
    response_ids: list[int]
    logprobs: list[float] = field(default_factory=list)
    finished: bool = True          # False when cut by max_tokens


class Engine(Protocol):
    #: "hf" or "vllm"
    kind: str
    #: the dtype the engine's weights compute in
    dtype: torch.dtype

    def generate(self, prompts: Sequence[list[int]], sampling: Sampling,
                 seed: int | None = None) -> list[Generation]:
        """Sample one completion per prompt (token ids); same seed -> same samples."""
        ...

    def update_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Take new weights (plain transformers names, LoRA merged) after an optimiser step.
        An engine that generates with the trainer's own tensors ignores them."""
        ...

    @property
    def needs_weights(self) -> bool:
        """False when the engine generates with the trainer's own tensors."""
        ...

    def sleep(self) -> None:
        """Free the engine's device memory (its group is about to train). An engine may drop
        its weights here rather than keep them (the `hf` engine's copy does)."""
        ...

    def wake(self) -> None:
        """Undo `sleep` before the next `update_weights` / `generate`; an engine that dropped
        its weights needs `update_weights` with every weight before it generates again."""
        ...
