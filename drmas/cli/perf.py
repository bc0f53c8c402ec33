"""`drmas perf advantages|rollout|step|retrieval`: benchmarks, each a ratio against a peer
measured in the same run; one subcommand per benchmark, each with only its own options."""

from __future__ import annotations

import json
from pathlib import Path

from drmas.cli.arguments import OneLineParser, add_command, int_at_least, positive
from drmas.errors import ConfigError


class _BenchmarkParser(OneLineParser):
    """A benchmark's parser: an option it does not take (one of another benchmark's) is an
    error that names this benchmark, not the whole `drmas` command."""

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras


def perf_advantages(args) -> None:
    from drmas.bench import advantages as perf

    perf.main_advantages(rows=args.rows, seed=args.seed)


def perf_retrieval(args) -> None:
    from drmas.bench.retrieval import main_retrieval

    main_retrieval(index=args.index, url=args.url, peer_url=args.peer_url,
                   queries=args.queries, clients=args.clients, seconds=args.seconds,
                   batch_size=args.batch_size, threads=args.threads,
                   warmup_s=args.warmup_s, rounds=args.rounds, out=args.out)


def perf_model(args) -> None:
    """`perf rollout` and `perf step`: report, write results/perf/<what>_<model>_<dtype>.json."""
    import torch

    from drmas.bench.models import NAMES, problems, resolve
    from drmas.bench.step import write_json

    if args.threads:
        torch.set_num_threads(args.threads)
    path, what = resolve(args.model)
    if args.what == "step":
        from drmas.bench.step import bench_step, report_step

        result = bench_step(path, problems(), steps=args.steps, warmup=args.warmup,
                            dtype=args.dtype, shared_prefix=not args.no_shared_prefix,
                            device=args.device)
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
    model = args.model if args.model in NAMES else Path(args.model).name
    where = "" if getattr(args, "device", "cpu") == "cpu" else f"_{args.device}"
    out = write_json(result, f"{args.what}_{model}_{args.dtype}{where}")
    print(f"-> {out}")
    if args.json:
        print(json.dumps(result))


def _add_model_options(sp, steps_help: str, warmup: bool = False) -> None:
    """The options of `perf rollout` and `perf step`."""
    sp.set_defaults(fn=perf_model)
    sp.add_argument("--model", default="tiny",
                    help="tiny|small|medium (random weights), tiny-warm (the default profile's "
                         "warm-started math model), smol, or a checkpoint folder")
    sp.add_argument("--steps", type=int, default=5, help=steps_help)
    if warmup:
        sp.add_argument("--warmup", type=int, default=1, help="warm-up steps per side")
    sp.add_argument("--dtype", choices=["float32", "bfloat16", "auto"], default="float32",
                    help="precision of both sides")
    sp.add_argument("--threads", type=positive, default=None,
                    help="torch threads (default: torch's)")
    sp.add_argument("--json", action="store_true",
                    help="print the result as one JSON object on the last line")


def _add_retrieval_options(sp) -> None:
    sp.set_defaults(fn=perf_retrieval)
    sp.add_argument("--index", help="serve this index (a `drmas serve` child)")
    sp.add_argument("--url", help="measure a running service instead")
    sp.add_argument("--peer-url", help="a second service to measure in the same run")
    sp.add_argument("--queries", help="JSONL: each row's `question` (or the title line of its "
                    "`contents`) is a query")
    sp.add_argument("--clients", type=positive, nargs="+", default=[8, 64],
                    help="concurrent clients, one measurement each (default: 8 64)")
    sp.add_argument("--seconds", type=float, default=10.0,
                    help="of load per service and client count")
    sp.add_argument("--rounds", type=positive, default=5,
                    help="alternating rounds those seconds are split into")
    sp.add_argument("--batch-size", type=positive, default=8, help="queries per request")
    sp.add_argument("--warmup-s", type=float, default=10.0,
                    help="seconds of load on each service before measuring")
    sp.add_argument("--threads", type=positive, default=1,
                    help="search threads of a served --index (default: 1)")
    sp.add_argument("--out", help="also write the numbers to this JSON file")


def _add_mode(modes, name, help_, description):
    return modes.add_parser(name, help=help_, description=description)


def add_commands(sub) -> None:
    """perf, with its benchmarks as subcommands."""
    sp = add_command(sub, "perf", None, "benchmarks (ratios against a peer measured in the same "
                     "run)", suite=None)
    modes = sp.add_subparsers(dest="what", required=True, parser_class=_BenchmarkParser,
                              help="the benchmark (`drmas perf BENCHMARK --help`: its options)")

    mode = _add_mode(modes, "advantages", "vectorised vs loop",
                     "vectorised advantage estimator vs a row loop in the paper code's style, "
                     "rows/s (ratio: vectorised / loop)")
    mode.set_defaults(fn=perf_advantages)
    mode.add_argument("--rows", type=int_at_least(1, 20_000_000), default=1_000_000,
                      help="rows of the synthetic batch (default: 1,000,000; at most 2x10^7, "
                           "about 6 GB of memory: 2x10^6 rows took 0.6 GB)")
    mode.add_argument("--seed", type=int, default=0, help="seed of the synthetic batch")

    _add_retrieval_options(_add_mode(
        modes, "retrieval", "queries/s of the service",
        "queries/s of the retrieval service (`--index` served by a `drmas serve` child, or "
        "`--url`) under concurrent clients, and of `--peer-url` in the same run (ratio: "
        "service / peer)"))
    _add_model_options(_add_mode(
        modes, "rollout", "vLLM vs transformers tokens/s",
        "tokens/s of the transformers and the vLLM engine, 8 prompts x 16 samples x 128 "
        "tokens (needs vLLM); writes results/perf/rollout_<model>_<dtype>.json (ratio: vLLM / "
        "transformers)"), steps_help="repeats per engine")
    step = _add_mode(
        modes, "step", "our RL step vs TRL's GRPOTrainer",
        "seconds per RL step of the single-agent `single` MAS, ours vs TRL's GRPOTrainer "
        "(needs the bench extra); writes results/perf/step_<model>_<dtype>.json (ratio: ours "
        "/ TRL)")
    _add_model_options(step, steps_help="measured steps per side", warmup=True)
    step.add_argument("--no-shared-prefix", action="store_true",
                      help="run ours without train.shared_prefix (each row's prompt computed "
                           "in full, as TRL does), for a comparison")
    step.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                      help="where both sides run (cuda: the first visible GPU; the JSON is "
                           "then step_<model>_<dtype>_cuda.json)")
