"""`drmas perf step`: one RL step of this trainer against TRL's GRPOTrainer, side by side.

The workload is single-agent so that TRL can run it too: the `single` math MAS (the Solver
alone), 8 prompts x 8 samples x up to 64 new tokens, one optimiser step per RL step, the
same model, learning rate, sampling (T = 1, top-p 1), clip 0.2, no KL, token-mean loss,
grad clip 1, float32 on both sides (or bf16 on both), both on the CPU (or both on one CUDA
device, `--device cuda`: the clocks then wait for the device's queued work). TRL trains
in a child process (`TRLProcess`: in one process the two sides' OpenMP teams slowed each
other), in a thread that a callback holds before each of its steps, so the two alternate
step by step (same machine load for both); the median over the steps after warm-up is
reported, split into generate (sampling only) and update (everything else: reward,
advantages, logprobs, backward, optimiser). Beside wall seconds it reports the process's
CPU seconds per step (each side's own process), which a machine shared with other jobs
disturbs far less (with one torch thread on the CPU they are the compute itself). TRL is in
the benchmark-only extra `bench`.

Beside the seconds it prints each side's decode rate (completion tokens per second of
sampling) and its update's model FLOPs: 6 x the model's matmul weights (`matmul_weights`) x
the tokens the update runs (forward and backward; attention's own products and any
recomputation left out), per second, and as a fraction of the rate a large matmul in the
same dtype reaches on the same device (`matmul_rate`), measured in the run rather than read
from a data sheet, so that a CPU's and a GPU's fractions mean the same thing.

Ours runs with `train.shared_prefix` on (each GRPO group's prompt computed once in the
update, drmas/train/prefix.py; `--no-shared-prefix` turns it off for a comparison) and
reports the tokens and padded positions its update runs with and without sharing (the
rows' own numbers, whichever ran); TRL's side is TRL's, every row whole.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import threading
import time
from pathlib import Path

from drmas.errors import DrmasError

PROMPTS, SAMPLES, NEW_TOKENS, LR = 8, 8, 64, 1e-5
#: both sides backpropagate the 64 rows in 4 micro-batches (memory: SmolLM2's 49k-token
#: vocabulary makes one row's logits ~30 MB in float32); one optimiser step per RL step
MICRO_BATCHES = 4


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


class OursSide:
    """This trainer on the `single` MAS, local backend, one optimiser step per RL step."""

    def __init__(self, model_path: Path, problems: list[dict], dtype: str, out: Path,
                 shared_prefix: bool = True, device: str = "cpu"):
        from drmas.config.profile import (Assignment, Config, EvalConfig, ModelSpec, ResourceConfig,
                                  TrainConfig)
        from drmas.config.suites import Suite
        from drmas.train.trainer import Trainer

        cfg = Config(
            profile="perf", seeds=[0], suites=["math"], methods=["grpo"], assignments=["one"],
            prompt_set="compact", models={"m": ModelSpec(kind="pretrained", path=str(model_path))},
            assignment_defs={"one": Assignment(True, {"default": "m"})},
            train=TrainConfig(steps=10**6, prompts_per_step=PROMPTS, group_n=SAMPLES,
                              ppo_mini_batches=1,
                              micro_batch_rows=PROMPTS * SAMPLES // MICRO_BATCHES,
                              micro_batch_tokens=1 << 20, lr=LR, max_response_tokens=NEW_TOKENS,
                              shared_prefix=shared_prefix),
            eval=EvalConfig(),
            resources=ResourceConfig(backend="local", num_gpus=1 if device == "cuda" else 0))
        suite = Suite(name="math", mas="single", agents=["solver"], reward="math",
                      invalid_penalty=0.1, datasets={})
        self.trainer = Trainer(cfg, suite, "one", "grpo", 0, problems, out,
                               engine_overrides={"engine": "hf", "dtype": dtype})
        placed = str(next(self.trainer.groups["m"].model.parameters()).device).split(":")[0]
        if placed != device:
            raise DrmasError(f"perf step: ours runs on {placed}, asked for {device}")
        self.sync = _synchronizer(device)
        self.gen_cpu = 0.0
        self.update_tokens: dict = {}
        self._update_rows: list[dict] = []
        self._count_generate_cpu()
        self._count_update_tokens()

    def step(self) -> dict:
        self.sync()
        t0, c0 = time.perf_counter(), time.process_time()
        self.gen_cpu = 0.0
        m = self.trainer.train_step()
        self.sync()
        total, cpu = time.perf_counter() - t0, time.process_time() - c0
        self._count_tokens()                    # after the clock: not part of the step
        tokens = m["tokens_per_s"] * m["time"]["generate"]
        sharing = "shared" if self.trainer.groups["m"].settings.shared_prefix else "unshared"
        return {"total": total, "generate": m["time"]["generate"],
                "update": total - m["time"]["generate"], "tokens": tokens,
                "update_tokens": self.update_tokens[sharing]["tokens"],   # the ones it ran
                "cpu_total": cpu, "cpu_generate": self.gen_cpu, "cpu_update": cpu - self.gen_cpu,
                **{f"update_{mode}_{k}": v for mode, d in self.update_tokens.items()
                   for k, v in d.items()}}

    def _count_update_tokens(self) -> None:
        """Keep the rows the update is handed, for `_count_tokens` once the step is timed."""
        group = self.trainer.groups["m"]
        update = group.update

        def kept(rows, *args, **kw):
            self._update_rows = rows
            return update(rows, *args, **kw)

        group.update = kept

    def _count_tokens(self) -> None:
        """Tokens the last update ran through the model, with and without sharing (one
        mini-batch, one agent here, so its plan is one prefix_chunks)."""
        from drmas.train.prefix import update_tokens

        rows, s = self._update_rows, self.trainer.groups["m"].settings
        self.update_tokens = update_tokens(
            [r["prompt_ids"] for r in rows],
            [len(r["prompt_ids"]) + len(r["response_ids"]) for r in rows],
            s.micro_batch_rows, s.micro_batch_tokens)

    def _count_generate_cpu(self) -> None:
        """CPU seconds of sampling (the engine's generate calls) within a step."""
        engine = self.trainer.groups["m"].engine
        generate = engine.generate

        def timed(*args, **kw):
            c0 = time.process_time()
            try:
                return generate(*args, **kw)
            finally:
                self.gen_cpu += time.process_time() - c0

        engine.generate = timed


class TRLSide:
    """TRL's GRPOTrainer on the same prompts and reward, stepped from the outside."""

    def __init__(self, model_path: Path, problems: list[dict], dtype: str, out: Path,
                 steps: int, device: str = "cpu"):
        try:
            from datasets import Dataset
            from transformers import TrainerCallback
            from trl import GRPOConfig, GRPOTrainer
        except ImportError as exc:
            raise DrmasError(f'perf step needs TRL: pip install -e ".[bench]" ({exc})') from exc
        from drmas.mas.base import Episode
        from drmas.models.tiny import load_model, load_tokenizer
        from drmas.registry import MAS
        from drmas.rewards import get_reward

        solver, reward = MAS.get("single")(prompt_set="compact").solver, get_reward("math")
        rows = [{"prompt": solver.prompt(Episode(problem=p)), "answers": p["answers"]}
                for p in problems]

        def team_reward(completions, answers, **_):
            out = []
            for c, gold in zip(completions, answers):
                text = c[-1]["content"] if isinstance(c, list) else c
                valid = solver.parse(text).valid
                out.append(float(reward(text, gold)) - 0.1 * (1.0 - float(valid)))
            return out

        side, sync = self, _synchronizer(device)
        self.go, self.done, self.records = threading.Semaphore(0), threading.Semaphore(0), []
        self.error: BaseException | None = None

        class Turns(TrainerCallback):
            def on_step_begin(self, args, state, control, **kw):
                side.go.acquire()
                sync()
                side.t0, side.gen_s, side.gen_tokens = time.perf_counter(), 0.0, 0
                side.row_tokens = 0
                side.c0, side.gen_cpu = time.process_time(), 0.0

            def on_step_end(self, args, state, control, **kw):
                sync()
                total, cpu = time.perf_counter() - side.t0, time.process_time() - side.c0
                side.records.append({"total": total, "generate": side.gen_s,
                                     "update": total - side.gen_s, "tokens": side.gen_tokens,
                                     "update_tokens": side.row_tokens,
                                     "cpu_total": cpu, "cpu_generate": side.gen_cpu,
                                     "cpu_update": cpu - side.gen_cpu})
                side.done.release()

        args = GRPOConfig(
            output_dir=str(out), learning_rate=LR, lr_scheduler_type="constant",
            weight_decay=0.01, max_grad_norm=1.0,
            per_device_train_batch_size=PROMPTS * SAMPLES // MICRO_BATCHES,
            gradient_accumulation_steps=MICRO_BATCHES, num_generations=SAMPLES,
            steps_per_generation=MICRO_BATCHES,
            max_completion_length=NEW_TOKENS, temperature=1.0, top_p=1.0, top_k=0, beta=0.0,
            num_iterations=1, epsilon=0.2, loss_type="dapo", max_steps=steps,
            logging_steps=10**6, save_strategy="no", report_to=[], use_cpu=device == "cpu",
            bf16=dtype == "bfloat16", seed=0, dataloader_num_workers=0, disable_tqdm=True)
        tok = load_tokenizer(model_path)
        self.trainer = GRPOTrainer(model=load_model(model_path), reward_funcs=team_reward,
                                   args=args, train_dataset=Dataset.from_list(rows),
                                   processing_class=tok, callbacks=[Turns()])
        generate = self.trainer._generate

        def timed_generate(prompts):
            sync()
            t0, c0 = time.perf_counter(), time.process_time()
            out = generate(prompts)
            sync()
            side.gen_s += time.perf_counter() - t0
            side.gen_cpu += time.process_time() - c0
            side.gen_tokens += sum(len(ids) for ids in out[1])   # completion_ids
            side.row_tokens += sum(len(p) + len(c) for p, c in zip(out[0], out[1]))
            return out

        self.trainer._generate = timed_generate
        self.thread = threading.Thread(target=self._train, daemon=True)
        self.thread.start()

    def _train(self) -> None:
        try:
            self.trainer.train()
        except BaseException as exc:           # reported by step()
            self.error = exc
            self.done.release()

    def step(self) -> dict:
        self.go.release()
        self.done.acquire()
        if self.error is not None:
            raise DrmasError(f"TRL failed: {self.error}") from self.error
        return self.records[-1]


class TRLProcess:
    """`TRLSide` in a child process of its own, stepped from here. In one process the two
    sides' torch ops run from two threads, each with an OpenMP team of its own, and once both
    teams exist every multi-threaded op of either side ran 2-3x slower (a matmul loop: 0.24 s
    before TRL's first step, 0.58 s after, at 2 threads; the same at 1 thread); apart, each
    side keeps the speed it has alone, and its CPU seconds are its own."""

    def __init__(self, model_path: Path, problems: list[dict], dtype: str, out: Path,
                 steps: int, device: str = "cpu"):
        import multiprocessing

        import torch

        ctx = multiprocessing.get_context("spawn")
        self.go, self.records = ctx.Semaphore(0), ctx.Queue()
        self.process = ctx.Process(
            target=_trl_child, daemon=True,
            args=(model_path, problems, dtype, out, steps, device, torch.get_num_threads(),
                  self.go, self.records))
        self.process.start()

    def step(self) -> dict:
        self.go.release()
        rec = self.records.get(timeout=3600)
        if isinstance(rec, str):
            raise DrmasError(f"TRL failed: {rec}")
        return rec

    def close(self) -> None:
        self.process.join(timeout=60)


def _trl_child(model_path, problems, dtype, out, steps, device, threads, go, records) -> None:
    import torch

    torch.set_num_threads(threads)
    try:
        side = TRLSide(model_path, problems, dtype, out, steps, device)
        for _ in range(steps):
            go.acquire()
            records.put(side.step())
        side.thread.join(timeout=60)
    except BaseException as exc:           # reported by step()
        records.put(f"{type(exc).__name__}: {exc}")


def _synchronizer(device: str):
    """A call that waits for the device's queued work (a no-op on the CPU), so that a clock
    read after it counts that work."""
    import torch

    return torch.cuda.synchronize if device == "cuda" else (lambda: None)


def bench_step(model_path: Path, problems: list[dict], steps: int = 5, warmup: int = 1,
               dtype: str = "float32", shared_prefix: bool = True, device: str = "cpu") -> dict:
    """Alternate ours / TRL for warmup + steps RL steps each; medians after warm-up."""
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise DrmasError("perf step --device cuda: torch sees no CUDA device")
    work = Path(tempfile.mkdtemp(prefix="drmas-perf-step-"))
    ours = OursSide(model_path, problems, dtype, work / "ours", shared_prefix, device)
    trl = TRLProcess(model_path, problems, dtype, work / "trl", steps + warmup, device)
    runs: dict[str, list[dict]] = {"ours": [], "trl": []}
    for k in range(steps + warmup):
        for name, side in (("ours", ours), ("trl", trl)):
            rec = side.step()
            if k >= warmup:
                runs[name].append(rec)
    trl.close()
    model = ours.trainer.groups["m"].model
    weights = matmul_weights(model)
    size, rate = matmul_rate(next(model.parameters()).device, next(model.parameters()).dtype)
    out = {"model": str(model_path), "dtype": dtype, "steps": steps, "warmup": warmup,
           "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
           "threads": torch.get_num_threads(), "shared_prefix": shared_prefix,
           "workload": {"prompts": PROMPTS, "samples": SAMPLES, "new_tokens": NEW_TOKENS, "lr": LR},
           "matmul_weights": weights, "matmul_probe": {"n": size, "flops_per_s": rate}}
    for name, recs in runs.items():
        out[name] = {k: _median([r[k] for r in recs])
                     for k in ("total", "generate", "update", "cpu_total", "cpu_generate",
                               "cpu_update")}
        out[name]["tokens_per_step"] = _median([r["tokens"] for r in recs])
        out[name]["decode_tokens_per_s"] = _median([r["tokens"] / r["generate"] for r in recs
                                                    if r["generate"] > 0])
        flops = _median([6 * weights * r["update_tokens"] / r["update"] for r in recs
                         if r["update"] > 0])
        out[name]["update_flops_per_s"] = flops
        out[name]["update_utilisation"] = flops / rate
        for key in sorted({k for r in recs for k in r if k.startswith("update_")}):
            out[name][key] = _median([r[key] for r in recs])     # update_tokens among them
        out[name]["all_total"] = [r["total"] for r in recs]
    out["ratio"] = out["ours"]["total"] / out["trl"]["total"]
    out["generate_ratio"] = out["ours"]["generate"] / out["trl"]["generate"]
    out["update_ratio"] = out["ours"]["update"] / out["trl"]["update"]
    out["cpu_ratio"] = out["ours"]["cpu_total"] / out["trl"]["cpu_total"]
    return out


def matmul_weights(model) -> int:
    """The weights that take part in matmuls, each counted once: every `nn.Linear`'s, the
    output layer's included when it is tied to the embedding (a lookup on the way in)."""
    import torch

    sizes = {id(m.weight): m.weight.numel() for m in model.modules()
             if isinstance(m, torch.nn.Linear)}
    return sum(sizes.values())


def matmul_rate(device, dtype, seconds: float = 0.3) -> tuple[int, float]:
    """(n, FLOP/s) of an n x n matmul in `dtype` on `device` (n = 4096 on a GPU, 1024 on a
    CPU), repeated for at least `seconds` after a warm-up: the denominator of the update's
    utilisation."""
    import torch

    device = torch.device(device)
    n = 4096 if device.type == "cuda" else 1024
    sync = _synchronizer(device.type)
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    for _ in range(2):
        a @ b
    sync()
    reps, t0 = 0, time.perf_counter()
    while True:
        a @ b
        reps += 1
        sync()
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds:
            return n, 2 * n ** 3 * reps / elapsed


def report_step(result: dict) -> None:
    where = (f"{result['threads']} threads" if result.get("device", "cpu") == "cpu"
             else result["device"])
    print(f"perf step: {result['model']} ({result['dtype']}, {where}), "
          f"{PROMPTS} prompts x {SAMPLES} samples x {NEW_TOKENS} new tokens "
          f"({MICRO_BATCHES} micro-batches), median of "
          f"{result['steps']} steps after {result['warmup']} warm-up, alternating")
    print(f"{'':6s} {'step s':>9s} {'generate s':>11s} {'update s':>9s} {'tokens':>7s} "
          f"{'CPU s: step':>12s} {'generate':>9s} {'update':>7s}")
    for name in ("ours", "trl"):
        r = result[name]
        print(f"{name:6s} {r['total']:9.2f} {r['generate']:11.2f} {r['update']:9.2f} "
              f"{r['tokens_per_step']:7.0f} {r['cpu_total']:12.2f} {r['cpu_generate']:9.2f} "
              f"{r['cpu_update']:7.2f}")
    o = result["ours"]
    if "update_unshared_tokens" in o:
        print(f"ours' update runs {o['update_shared_tokens']:.0f} tokens "
              f"({o['update_shared_padded']:.0f} padded) with the shared prefix, "
              f"{o['update_unshared_tokens']:.0f} ({o['update_unshared_padded']:.0f} padded) "
              f"without; sharing {'on' if result.get('shared_prefix') else 'off'} in this run")
    print(f"ratio ours/TRL: step {result['ratio']:.2f}, generate {result['generate_ratio']:.2f}, "
          f"update {result['update_ratio']:.2f}; CPU time {result['cpu_ratio']:.2f}")
    if "matmul_probe" in result:
        probe = result["matmul_probe"]
        print(f"decode tokens/s: ours {o['decode_tokens_per_s']:,.0f}, "
              f"TRL {result['trl']['decode_tokens_per_s']:,.0f}")
        print(f"update model FLOP/s, 6 x {result['matmul_weights'] / 1e6:.2f}M matmul weights x "
              f"tokens run, and its share of a {probe['n']}x{probe['n']} {result['dtype']} "
              f"matmul's {_flops(probe['flops_per_s'])} here: "
              + ", ".join(f"{label} {_flops(result[name]['update_flops_per_s'])} "
                          f"({result[name]['update_tokens']:,.0f} tokens, "
                          f"{100 * result[name]['update_utilisation']:.1f}%)"
                          for name, label in (("ours", "ours"), ("trl", "TRL"))))


def _flops(rate: float) -> str:
    for unit, scale in (("TFLOP/s", 1e12), ("GFLOP/s", 1e9)):
        if rate >= scale:
            return f"{rate / scale:.1f} {unit}"
    return f"{rate / 1e6:.1f} MFLOP/s"


def write_json(result: dict, name: str, root: str | Path = "results/perf") -> Path:
    from drmas.data.io import atomic_write_text

    path = Path(root) / f"{name}.json"
    atomic_write_text(path, json.dumps(result, indent=1))
    return path
