"""`drmas check gpu`: the single-device path end to end, in minutes, with nothing but torch,
transformers and this package (no Ray, vLLM, Snakemake, jsonschema, network).

A Qwen2.5-0.5B-shaped model (random weights; `--size tiny`: the default profile's small
shape) with a tokenizer trained on generated arithmetic and a short warm start on the
device (without one every reply is equally invalid, every advantage 0 and nothing would
train), then: two RL steps of the math MAS
for `grpo` and `drmas` through the local backend in the precision `dtype: auto` picks (bf16
on an H200), a checkpoint save + resume (weights equal after reload), sleep of the engine
and its refill (`sync`: a bf16 copy equal to the trainer's weights again), and an
evaluation of 64 episodes. It asserts that every group's parameters changed, that every
phase ran on the requested device, and prints phase times, tokens/s and peak memory.
Everything is imported inside the function: the module itself needs nothing.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from drmas.errors import DrmasError

#: Qwen2.5-0.5B's shape (its real vocabulary is replaced by the small trained tokenizer)
SHAPES = {
    "0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                 num_attention_heads=14, num_key_value_heads=2),
    "tiny": dict(hidden_size=128, intermediate_size=384, num_hidden_layers=3,
                 num_attention_heads=2, num_key_value_heads=2),
}
#: RL batch per size: prompts per step, samples per prompt, new tokens per call
BATCH = {"0.5b": (16, 8, 128), "tiny": (4, 4, 32)}
#: warm start per size: steps, batch, learning rate
WARM = {"0.5b": (40, 32, 3e-4), "tiny": (40, 8, 3e-3)}
EVAL_EPISODES = 64
#: the transformers engine in the precision `dtype: auto` picks (bf16 on an H200)
ENGINE = {"engine": "hf", "dtype": "auto"}


def build_model(size: str, out: Path, device: str, seed: int = 0):
    """Tokenizer (trained on generated arithmetic traces) + random-weight Qwen2 of `size`,
    warm-started on `device` (dtype auto) and saved to `out`; returns the train and test
    problems."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from drmas.data.generators.arithmetic import generate
    from drmas.mas.math.demos import math_traces
    from drmas.models.tiny import train_tokenizer
    from drmas.train.sft import sft

    rows = generate({"arith-1": {"level": 1}, "arith-2": {"level": 2}}, 400, 32, seed=seed)
    traces = math_traces([r for r in rows if r["split"] == "train"], seed=seed, mistake_rate=0.3)
    tok = train_tokenizer((f"{m[-1]['role']}\n{m[-1]['content']}\nassistant\n{r}"
                           for _, m, r in traces), 1024)
    config = Qwen2Config(vocab_size=len(tok), max_position_embeddings=2048,
                         tie_word_embeddings=True, rope_theta=1e6, use_sliding_window=False,
                         **SHAPES[size])
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).to(device)
    steps, batch, lr = WARM[size]
    sft(model, tok, traces, steps=steps, batch_size=batch, lr=lr, seed=seed, dtype="auto",
        desc="check warm start")
    from drmas.data.io import atomic_dir

    with atomic_dir(out) as partial:
        model.save_pretrained(partial, safe_serialization=True)
        tok.save_pretrained(partial)
    return ([r for r in rows if r["split"] == "train"], [r for r in rows if r["split"] == "test"])


def make_config(model_path: Path, size: str, device: str):
    """The check's profile, built as dataclasses (no schema validation: no jsonschema)."""
    from drmas.config.profile import (Assignment, Config, EvalConfig, ModelSpec, ResourceConfig,
                              TrainConfig)

    prompts, n, tokens = BATCH[size]
    return Config(
        profile="check", seeds=[0], suites=["math"], methods=["grpo", "drmas"],
        assignments=["shared"], prompt_set="compact",
        models={"m": ModelSpec(kind="pretrained", path=str(model_path))},
        assignment_defs={"shared": Assignment(True, {"default": "m"})},
        train=TrainConfig(steps=2, prompts_per_step=prompts, group_n=n, ppo_mini_batches=2,
                          micro_batch_rows=64, micro_batch_tokens=16384, lr=1e-6,
                          max_response_tokens=tokens, save_every=1),
        eval=EvalConfig(n=4, batch_size=EVAL_EPISODES, max_problems_per_source=8),
        resources=ResourceConfig(backend="local", num_gpus=None if device == "cuda" else 0),
    )


class Meter:
    """Phase timer that also records the device's peak memory of each phase."""

    def __init__(self, device: str):
        import torch

        self.torch, self.cuda = torch, device == "cuda"
        self.rows: list[tuple[str, float, float]] = []

    def start(self):
        if self.cuda:
            self.torch.cuda.synchronize()
            self.torch.cuda.reset_peak_memory_stats()
        return time.perf_counter()

    def stop(self, phase: str, t0: float) -> float:
        import resource

        if self.cuda:
            self.torch.cuda.synchronize()
            peak = self.torch.cuda.max_memory_allocated() / 2**20
        else:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        seconds = time.perf_counter() - t0
        self.rows.append((phase, seconds, peak))
        return seconds


def _weights(groups) -> dict:
    return {g: {k: v.detach().float().cpu().clone() for k, v in grp.model.state_dict().items()}
            for g, grp in groups.items()}


def _assert_on(device: str, groups) -> None:
    for g, grp in groups.items():
        info = grp.describe()
        where = {str(p.device).split(":")[0] for p in grp.model.parameters()}
        if where != {device} or not info["device"].startswith(device):
            raise DrmasError(f"check: group {g} has parameters on {where}, expected {device}")


def check_gpu(device: str = "cuda", size: str = "0.5b", work: str | Path | None = None) -> dict:
    """Run the check; print a report; return its numbers. Raises DrmasError on a failure."""
    import torch

    from drmas.config.suites import Suite
    from drmas.evaluation.runner import evaluate
    from drmas.train import checkpoint
    from drmas.train.trainer import Trainer

    if device == "cuda" and not torch.cuda.is_available():
        raise DrmasError("check gpu: torch sees no CUDA device (use --device cpu to run the "
                         "same path on the CPU)")
    work = Path(work or tempfile.mkdtemp(prefix="drmas-check-"))
    meter = Meter(device)
    t0 = meter.start()
    train_rows, test_rows = build_model(size, work / "model", device)
    meter.stop("tokenizer + model + warm start", t0)
    cfg = make_config(work / "model", size, device)
    # the math MAS on integer answers: the `arithmetic` reward needs no math_verify
    suite = Suite(name="math", mas="math", agents=["solver", "verifier"], reward="arithmetic",
                  invalid_penalty=0.1, datasets={}, mas_options={"max_loop": 2})
    report = {"device": device, "size": size, "methods": {}}
    for method in ("grpo", "drmas"):
        out = work / "runs" / method
        t0 = meter.start()
        trainer = Trainer(cfg, suite, "shared", method, 0, train_rows, out,
                          engine_overrides=ENGINE)
        meter.stop(f"{method}: load groups", t0)
        _assert_on(device, trainer.groups)
        before = _weights(trainer.groups)
        steps = []
        for k in range(cfg.train.steps):
            t0 = meter.start()
            m = trainer.train_step()
            meter.stop(f"{method}: RL step {k + 1}", t0)
            steps.append({"time": m["time"], "tokens_per_s": m["tokens_per_s"],
                          "update_tokens_per_s": m["update_tokens_per_s"], "rows": m["rows"]})
        _assert_on(device, trainer.groups)
        after = _weights(trainer.groups)
        for g in after:
            unchanged = [k for k in after[g] if torch.equal(after[g][k], before[g][k])]
            if unchanged:
                raise DrmasError(f"check: {method} group {g}: {len(unchanged)} tensors did not "
                                 f"change in {cfg.train.steps} RL steps, e.g. {unchanged[0]}")
        t0 = meter.start()
        trainer.save(checkpoint.step_dir(trainer.ckpt_root, trainer.step))
        meter.stop(f"{method}: save checkpoint", t0)
        t0 = meter.start()
        resumed = Trainer(cfg, suite, "shared", method, 0, train_rows, out,
                          engine_overrides=ENGINE)
        if not resumed.resume() or resumed.step != trainer.step:
            raise DrmasError(f"check: {method} did not resume at step {trainer.step}")
        for g, w in _weights(resumed.groups).items():
            if any(not torch.equal(w[k], after[g][k]) for k in w):
                raise DrmasError(f"check: {method} group {g}: resumed weights differ")
        meter.stop(f"{method}: resume", t0)
        grp = next(iter(resumed.groups.values()))
        report["methods"][method] = {"steps": steps, "describe": grp.describe(),
                                     "sleep": _sleep_wake(grp, device)}
        resumed.close()
        trainer.close()
        del trainer, resumed, grp
        if device == "cuda":
            torch.cuda.empty_cache()
    t0 = meter.start()
    scores = evaluate(cfg, suite, "shared", test_rows, work / "eval", seed=0,
                      engine_overrides=ENGINE)
    meter.stop(f"evaluate {EVAL_EPISODES} episodes", t0)
    report["eval_overall"] = scores["overall"]
    report["phases"] = meter.rows
    _print(report, meter.cuda)
    return report


def _sleep_wake(grp, device: str) -> dict:
    """Device memory before sleep, asleep, after wake and refill (`sync`, as after an update;
    MiB; CPU: not measured); an engine with weights of its own must hold the trainer's again."""
    import torch

    if device != "cuda":
        grp.sleep()
        grp.sync()
        return {}
    used = lambda: torch.cuda.memory_allocated() / 2**20          # noqa: E731
    awake = used()
    grp.sleep()
    asleep = used()
    grp.sync()
    woken = used()
    if grp.engine.needs_weights:
        if not asleep < awake:
            raise DrmasError(f"check: sleep freed nothing ({awake:.0f} -> {asleep:.0f} MiB)")
        from drmas.train.workers import plain_weights

        trained = dict(plain_weights(grp.full_model))
        for name, value in grp.engine.model.state_dict().items():
            if not torch.equal(value, trained[name].to(value.dtype)):
                raise DrmasError(f"check: after sleep and sync the engine's {name} differs")
    return {"awake_mib": awake, "asleep_mib": asleep, "woken_mib": woken}


def _print(report: dict, cuda: bool) -> None:
    mem = "peak GPU MiB" if cuda else "peak RSS MiB"
    print(f"drmas check gpu: device {report['device']}, size {report['size']}")
    print(f"{'phase':34s} {'seconds':>9s} {mem:>13s}")
    for phase, seconds, peak in report["phases"]:
        print(f"{phase:34s} {seconds:9.2f} {peak:13.0f}")
    for method, r in report["methods"].items():
        d = r["describe"]
        print(f"{method}: {d['engine']} engine, {d['dtype']} ({d['dtype_reason']}), "
              f"{d['params'] / 1e6:.1f}M params on {d['device']}")
        for k, s in enumerate(r["steps"], 1):
            t = s["time"]
            print(f"  step {k}: generate {t['generate']:.2f}s ({s['tokens_per_s']:,.0f} tok/s), "
                  f"update {t['update']:.2f}s ({s['update_tokens_per_s']:,.0f} tok/s), "
                  f"sync {t['sync']:.2f}s, {s['rows']} rows")
        if r["sleep"]:
            s = r["sleep"]
            print(f"  sleep/wake: {s['awake_mib']:.0f} -> {s['asleep_mib']:.0f} -> "
                  f"{s['woken_mib']:.0f} MiB allocated")
    print(f"evaluation: {report['eval_overall']}")
    print("check gpu: OK")
