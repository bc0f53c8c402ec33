"""`drmas perf rollout`: generated tokens/s of the transformers and the vLLM engine on the
same model, prompts and sampling (n samples per prompt, T = 1), in one process, alternating
(hf, vllm, hf, vllm, ...) so that both see the same machine load; the median over repeats.
The vLLM engine's start-up (~15-30 s on CPU) is reported apart, not in tokens/s.
Needs the vllm extra; runs in the environment that has it (e.g. .venv-vllm).
"""

from __future__ import annotations

import statistics
import time

PROMPTS, SAMPLES, NEW_TOKENS = 8, 16, 128


def bench_rollout(model_path, repeats: int = 3, dtype: str = "float32",
                  batch_size: int = 256) -> dict:
    import torch

    from drmas.bench.models import problems
    from drmas.mas.base import Episode
    from drmas.models.encoding import encode_prompt
    from drmas.models.precision import resolve_dtype
    from drmas.models.tiny import load_model, load_tokenizer
    from drmas.registry import MAS
    from drmas.rollout.base import Sampling
    from drmas.rollout.engines import make_engine

    tok = load_tokenizer(model_path)
    compute, _ = resolve_dtype(dtype, "cpu")
    model = load_model(model_path)
    solver = MAS.get("single")(prompt_set="compact").solver
    prompts = [encode_prompt(tok, solver.prompt(Episode(problem=p))) for p in problems()[:PROMPTS]]
    batch = [p for p in prompts for _ in range(SAMPLES)]
    sampling = Sampling(1.0, 1.0, NEW_TOKENS)
    engines = {"hf": make_engine("hf", model, tok, model_path=model_path, dtype=compute,
                                 batch_size=batch_size)}
    t0 = time.perf_counter()
    engines["vllm"] = make_engine("vllm", model, tok, model_path=model_path, dtype=compute)
    start_s = time.perf_counter() - t0
    for engine in engines.values():                     # warm-up: kernels, caches
        engine.generate(batch[:SAMPLES], Sampling(1.0, 1.0, 8), seed=0)
    rates: dict[str, list[float]] = {k: [] for k in engines}
    tokens: dict[str, list[int]] = {k: [] for k in engines}
    for r in range(repeats):
        for name, engine in engines.items():
            t0 = time.perf_counter()
            gens = engine.generate(batch, sampling, seed=r)
            seconds = time.perf_counter() - t0
            n = sum(len(g.response_ids) for g in gens)
            rates[name].append(n / seconds)
            tokens[name].append(n)
    out = {"model": str(model_path), "dtype": str(compute).removeprefix("torch."),
           "threads": torch.get_num_threads(), "repeats": repeats, "vllm_start_s": start_s,
           "workload": {"prompts": PROMPTS, "samples": SAMPLES, "new_tokens": NEW_TOKENS}}
    for name in engines:
        out[f"{name}_tokens_per_s"] = statistics.median(rates[name])
        out[f"{name}_all_tokens_per_s"] = rates[name]
        out[f"{name}_tokens"] = statistics.median(tokens[name])
    out["ratio"] = out["vllm_tokens_per_s"] / out["hf_tokens_per_s"]
    return out


def report_rollout(result: dict) -> None:
    print(f"perf rollout: {result['model']} ({result['dtype']}, {result['threads']} threads), "
          f"{PROMPTS} prompts x {SAMPLES} samples x {NEW_TOKENS} new tokens, median of "
          f"{result['repeats']}, alternating; vLLM start {result['vllm_start_s']:.1f}s")
    for name in ("hf", "vllm"):
        print(f"  {name:5s} {result[f'{name}_tokens_per_s']:9,.0f} tokens/s "
              f"({result[f'{name}_tokens']:.0f} tokens per call)")
    print(f"ratio vLLM/transformers: {result['ratio']:.2f}")
