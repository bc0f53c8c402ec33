"""A sampling-only group: one model loaded for inference and its rollout engine, for
evaluation, which samples and never trains (and so imports nothing of `drmas.train`).

It loads and samples as a one-worker training group does (`train.workers.LocalGroup` with
`trainable=False`): the same dtype choice (`precision.resolve_dtype`), tokenizer and model
loading, the same engine arguments (`engines.make_engine`: batch size, seed, sleep mode) and
the same prompt encoding, so the same seeds give the same samples
(tests/evaluation/test_evaluate.py compares the two).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from drmas.config.profile import ResourceConfig
    from drmas.mas.base import Messages
    from drmas.models.encoding import PromptEncoding
    from drmas.rollout.base import Generation, Sampling


def visible_gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def local_device(res: ResourceConfig) -> str:
    """The device of in-process groups (local backend, evaluation): the GPU when there is
    one and the profile does not set `num_gpus: 0`."""
    return "cuda" if visible_gpus() and res.num_gpus != 0 else "cpu"


class SamplingGroup:
    """The agents that share one model, sampling only: `generate` as a worker group's."""

    def __init__(self, name: str, model_path: str | Path, agents: Sequence[str],
                 eval_batch: int = 256, device: str = "cpu",
                 encoding: PromptEncoding | None = None, engine: str = "hf",
                 dtype: str = "float32", seed: int = 0, sleep_mode: bool = False):
        """`engine`: hf | vllm; `dtype`: auto | float32 | bfloat16 (see
        drmas/models/precision.py); `sleep_mode`: build the engine able to sleep (on GPU)."""
        import torch

        from drmas.models.encoding import PromptEncoding
        from drmas.models.precision import dtype_name, resolve_dtype
        from drmas.models.tiny import load_model, load_tokenizer
        from drmas.rollout.engines import make_engine

        self.name, self.agents = name, list(agents)
        self.encoding = encoding or PromptEncoding()    # chat-template kwargs, prompt cap
        self.device = torch.device(device)
        self.dtype, self.dtype_reason = resolve_dtype(dtype, self.device)
        self.tokenizer = load_tokenizer(model_path)
        self.model = load_model(model_path).to(self.device)   # merged weights: no adapters
        self.model.eval()
        self.engine = make_engine(engine, self.model, self.tokenizer, model_path=model_path,
                                  dtype=self.dtype, batch_size=eval_batch, seed=seed,
                                  sleep_mode=sleep_mode and self.device.type == "cuda")
        print(f"group {name} rank 0: {engine} engine, {dtype_name(self.dtype)} "
              f"({self.dtype_reason}) on {self.device}", file=sys.stderr)

    def generate(self, prompts: Sequence[Messages], sampling: Sampling, seed: int) -> list[Generation]:
        """Tokenise with this group's own tokenizer and chat template, then sample."""
        from drmas.models.encoding import encode_prompts

        if not prompts:
            return []
        ids = encode_prompts(self.tokenizer, list(prompts), self.encoding)
        return self.engine.generate(ids, sampling, seed=seed)

    def close(self) -> None:
        pass
