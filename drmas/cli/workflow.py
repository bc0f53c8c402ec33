"""The workflow stages the Snakemake rules run, one subcommand each: `prepare` (the suite's
train/test JSONL), `tokenizer`, `warmstart` (SFT of a tiny model; a format warm start of a
pretrained one), `train` (one RL run) and `evaluate` (samples.jsonl, scores.json)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from drmas.cli.arguments import add_command, output_folder
from drmas.cli.job import demonstrations, load_config, load_suite, retriever, setup_torch
from drmas.errors import ConfigError, DataError

DATA_HELP = "prepared data folder (train.jsonl, test.jsonl from `drmas prepare`)"
ASSIGNMENT_HELP = "agent -> model assignment, a name from the config's assignments:"


def cmd_prepare(args) -> None:
    from contextlib import ExitStack

    from drmas.data.io import atomic_path, dump_jsonl, validate_prepared
    from drmas.data.prepare import check_no_overlap, prepare_corpus, prepare_rows

    cfg, suite = load_config(args), load_suite(args)
    key = cfg.dataset_key(suite.name)
    spec = suite.data_spec(key)
    rows = prepare_rows(spec, seed=args.seed)
    out = Path(args.out)
    docs = prepare_corpus(spec, seed=args.seed)
    if docs is None and suite.retrieval:
        raise ConfigError(f"benchmark {suite.name!r}: datasets entry {key!r} names no corpus to "
                          "search; add `corpus: {source: NAME}` (a hub corpus such as wiki18, or "
                          "any JSONL with `path: FILE`)")
    # heldout: only where a generator holds some out
    splits = {split: [r for r in rows if r["split"] == split] for split in ("train", "test", "heldout")}
    if not splits["heldout"]:
        del splits["heldout"]
    for split, part in splits.items():        # every split checked before anything is written
        validate_prepared(part, out / f"{split}.jsonl")
    check_no_overlap(splits, out)
    written = [0]

    def counted(items):
        for item in items:
            written[0] += 1
            yield item

    # All or nothing: every file is written under a temporary name and renamed into place
    # only when all of them were written (an error leaves the older set as it was).
    names = ["corpus.jsonl", *(f"{split}.jsonl" for split in splits)]
    with ExitStack() as stack:
        tmp = {name: stack.enter_context(atomic_path(out / name)) for name in names}
        # streamed: a hub corpus (wiki-18: 21M passages) is never held whole
        dump_jsonl(tmp["corpus.jsonl"], counted(docs or []))  # empty when nothing is searched
        if suite.retrieval and not written[0]:
            raise DataError(f"benchmark {suite.name!r}: the corpus of datasets entry {key!r} has "
                            f"no passages ({out / 'corpus.jsonl'})")
        for split, part in splits.items():
            dump_jsonl(tmp[f"{split}.jsonl"], part)
    print(f"corpus: {written[0]} documents -> {out / 'corpus.jsonl'}")
    for split, part in splits.items():
        print(f"{split}: {len(part)} rows -> {out / f'{split}.jsonl'}")


def cmd_tokenizer(args) -> None:
    from drmas.data.io import atomic_dir, read_prepared
    from drmas.models.tiny import train_tokenizer

    cfg, suite = load_config(args), load_suite(args)
    rows = read_prepared(Path(args.data) / "train.jsonl")
    traces = demonstrations(args, cfg, suite, rows, seed=0)
    # the role names of the chat template are text too: "user\n…", "assistant\n…"
    texts = (f"{m[-1]['role']}\n{m[-1]['content']}\nassistant\n{r}" for _, m, r in traces)
    tok = train_tokenizer(texts, cfg.tokenizer.vocab_size, cfg.tokenizer.whole_numbers)
    with atomic_dir(args.out) as out:
        tok.save_pretrained(out)
    print(f"tokenizer ({len(tok)} tokens) -> {args.out}")


def _check_warmstart_model(cfg, args) -> None:
    if args.model not in cfg.models:
        raise ConfigError(f"unknown model {args.model!r}; the config's models: "
                          f"{', '.join(cfg.models)}")
    if not cfg.warm_started(args.model):
        raise ConfigError(f"model {args.model!r} is pretrained without a `warmstart:` block: "
                          f"it is not warm-started (set models.{args.model}.warmstart to do so)")
    if cfg.models[args.model].kind != "tiny":
        return
    if args.tokenizer is None:
        raise ConfigError(f"model {args.model!r} is tiny: --tokenizer DIR is needed (`drmas "
                          "tokenizer` writes it)")
    if not Path(args.tokenizer).is_dir():
        raise DataError(f"{args.tokenizer}: tokenizer folder not found (`drmas tokenizer` "
                        "writes it)")


def _base_model(cfg, args, spec):
    """(model, tokenizer) a warm start begins with: a tiny model built from its config with
    the suite's tokenizer, or the pretrained model (float32 weights) with its own."""
    from drmas.models.tiny import load_model, load_tokenizer, tiny_model

    if spec.kind == "tiny":
        tok = load_tokenizer(args.tokenizer)
        return tiny_model(spec, len(tok), seed=args.seed), tok
    return load_model(spec.path), load_tokenizer(spec.path)


def cmd_warmstart(args) -> None:
    from drmas.data.io import atomic_dir, read_prepared
    from drmas.train.sft import sft

    cfg, suite = load_config(args), load_suite(args)
    _check_warmstart_model(cfg, args)
    rows = read_prepared(Path(args.data) / "train.jsonl")
    setup_torch(cfg)
    w = cfg.warmstart_for(args.model)
    if args.seed is None:
        args.seed = w.seed
    spec = cfg.models[args.model]
    roles = cfg.roles_of(args.model, suite.agents)
    if not roles:
        raise ConfigError(f"model {args.model!r} plays no agent of suite {suite.name!r} in the "
                          f"assignments {cfg.assignments}: nothing to warm-start")
    if spec.kind == "tiny":
        demo_options, sft_options = {}, {}
    else:   # a format warm start: the prompts it will be asked in RL, its own chat template;
        # its prompts are longer than a tiny model's: micro-batches as the RL update's
        demo_options = {"prompt_set": cfg.prompt_set, "mistake_rate": w.mistake_rate}
        sft_options = {"micro_batch_tokens": cfg.train.micro_batch_tokens}
    traces = [t for t in demonstrations(args, cfg, suite, rows, seed=args.seed, **demo_options)
              if t[0] in roles]
    print(f"warm start {args.model} ({spec.kind}) on {len(traces)} traces of {', '.join(roles)}")
    model, tok = _base_model(cfg, args, spec)
    dtype = args.dtype or w.dtype
    losses = sft(model, tok, traces, steps=w.steps, batch_size=w.batch_size, lr=w.lr,
                 seed=args.seed, desc=f"warmstart {suite.name}/{args.model}", dtype=dtype,
                 last_layer=w.last_layer, **sft_options)
    with atomic_dir(args.out) as out:
        model.save_pretrained(out, safe_serialization=True)
        tok.save_pretrained(out)
        (out / "sft_losses.json").write_text(json.dumps(losses))
    print(f"warm-started {args.model}: loss {losses[0]:.3f} -> {losses[-1]:.3f}; saved to {args.out}")


def cmd_train(args) -> None:
    from drmas.data.io import read_prepared
    from drmas.train.trainer import Trainer

    cfg, suite = load_config(args), load_suite(args)
    rows = read_prepared(Path(args.data) / "train.jsonl")
    setup_torch(cfg)
    cfg = cfg.for_method(args.method)
    Trainer(cfg, suite, args.assignment, args.method, args.seed, rows, args.out,
            retriever=retriever(args, suite, cfg), checkpoints=args.checkpoints).run()


def cmd_evaluate(args) -> None:
    from drmas.cli import inputs as checks
    from drmas.data.io import read_prepared
    from drmas.evaluation.runner import evaluate, group_paths, reuse_base

    cfg, suite = load_config(args), load_suite(args)
    if args.same_as and args.run:
        raise ConfigError("--same-as reuses a base evaluation; it cannot go with --run")
    if args.same_as and (args.split != "test" or args.max_problems is not None):
        raise ConfigError("--same-as copies the workflow's test evaluation; it cannot go with "
                          "--split or --max-problems")
    base_dirs = _base_models(cfg, args)
    meta = {"suite": suite.name, "split": args.split, "assignment": args.assignment,
            "seed": args.seed,
            "method": checks.check_trained_run(args.run) if args.run else "base"}
    if base_dirs:
        meta["base_models"] = base_dirs
    if meta["method"] != "base":            # the run's own settings (e.g. response budgets)
        cfg = cfg.for_method(meta["method"])
    if args.same_as:
        checks.check_eval_dir(args.same_as)
        scores = reuse_base(cfg, suite, args.same_as, args.out, meta)
    else:
        path = Path(args.data) / f"{args.split}.jsonl"
        if args.split == "heldout" and not path.exists():
            raise DataError(f"{path}: no held-out split; `drmas prepare` writes one for a "
                            "generated suite with questions in neither train nor test (the "
                            "knowledge generator's); rerun it if this folder is older")
        rows = read_prepared(path)
        if args.max_problems is not None:
            cfg = dataclasses.replace(cfg, eval=dataclasses.replace(
                cfg.eval, max_problems_per_source=args.max_problems or None))
        checks.check_model_dirs(p for p, *_ in group_paths(
            cfg, suite, args.assignment, args.run, base_dirs=base_dirs).values())
        setup_torch(cfg)
        scores = evaluate(cfg, suite, args.assignment, rows, args.out, run_dir=args.run,
                          seed=args.seed, meta=meta, retriever=retriever(args, suite, cfg),
                          base_dirs=base_dirs)
    print(json.dumps(scores["overall"]))


def _base_models(cfg, args) -> dict[str, str]:
    """{model: folder} from `--base-model NAME=DIR` (base evaluations only)."""
    if args.base_model and (args.run or args.same_as):
        raise ConfigError("--base-model replaces a base model; it cannot go with --run or "
                          "--same-as")
    out = {}
    for item in args.base_model:
        name, sep, folder = item.partition("=")
        if not sep or not name or not folder:
            raise ConfigError(f"--base-model {item!r}: expected NAME=DIR, e.g. "
                              f"small=results/default/models/math/small")
        if name not in cfg.models:
            raise ConfigError(f"--base-model {item!r}: unknown model {name!r}; the config's "
                              f"models: {', '.join(cfg.models)}")
        out[name] = folder
    return out


def _add_data_commands(sub) -> None:
    sp = add_command(sub, "prepare", cmd_prepare, "write the suite's train/test JSONL")
    sp.add_argument("--out", required=True, type=output_folder, help="output folder")
    sp.add_argument("--seed", type=int, default=0, help="generator seed")

    sp = add_command(sub, "tokenizer", cmd_tokenizer, search=True,
                     help_="train the tiny profile's BPE tokenizer on task text")
    sp.add_argument("--data", required=True, help=DATA_HELP)
    sp.add_argument("--out", required=True, type=output_folder, help="tokenizer folder to write")


def _add_model_commands(sub) -> None:
    sp = add_command(sub, "warmstart", cmd_warmstart, search=True,
                     help_="SFT a model on agent demonstrations: a tiny model built from its "
                           "config, or a pretrained one with a `warmstart:` block (a format "
                           "warm start in the profile's prompts)")
    sp.add_argument("--data", required=True, help=DATA_HELP)
    sp.add_argument("--tokenizer", default=None,
                    help="tiny models: tokenizer folder (from `drmas tokenizer`); a pretrained "
                         "model brings its own")
    sp.add_argument("--model", required=True, help="model name from the config's models:")
    sp.add_argument("--out", required=True, type=output_folder, help="model folder to write")
    sp.add_argument("--seed", type=int, default=None,
                    help="seed of the model's init, its demonstrations and their order "
                         "(default: the config's warmstart seed)")
    sp.add_argument("--dtype", choices=["auto", "float32", "bfloat16"], default=None,
                    help="warm-start precision (default: the config's warmstart dtype, else auto)")

    sp = add_command(sub, "train", cmd_train, search=True,
                     help_="one RL run (assignment x method x seed)")
    sp.add_argument("--data", required=True, help=DATA_HELP)
    sp.add_argument("--assignment", required=True, help=ASSIGNMENT_HELP)
    sp.add_argument("--method", required=True,
                    help="advantage method: grpo, drmas or an ablation (the config's methods:)")
    sp.add_argument("--seed", type=int, required=True, help="run seed (sampling and updates)")
    sp.add_argument("--out", required=True, type=output_folder, help="run folder")
    sp.add_argument("--checkpoints", default=None, metavar="DIR",
                    help="checkpoint folder (default: OUT/checkpoints); the newest intact "
                         "checkpoint of the same configuration is resumed")

    sp = add_command(sub, "evaluate", cmd_evaluate, search=True,
                     help_="n samples per test problem -> samples.jsonl, scores.json")
    sp.add_argument("--data", required=True, help=DATA_HELP)
    sp.add_argument("--assignment", required=True, help=ASSIGNMENT_HELP)
    sp.add_argument("--run", default=None, help="run folder (omit to evaluate the base models)")
    sp.add_argument("--same-as", default=None, metavar="EVAL_DIR",
                    help="base only: copy this eval folder of an assignment with the same base "
                         "models (the workflow's twin: Config.base_twin)")
    sp.add_argument("--base-model", action="append", default=[], metavar="NAME=DIR",
                    help="base only: evaluate the model folder DIR in place of the config's "
                         "model NAME (a warm start of another seed or length); repeatable")
    sp.add_argument("--seed", type=int, default=0, help="sampling seed")
    sp.add_argument("--split", choices=["test", "heldout"], default="test",
                    help="the prepared split to evaluate: test (the workflow's), or heldout (the "
                         "questions of a generated suite in neither train nor test, where `drmas "
                         "prepare` wrote heldout.jsonl: many unseen questions, for measuring a "
                         "base model within a point or two)")
    sp.add_argument("--max-problems", type=int, default=None, metavar="N",
                    help="problems per data_source (default: the config's "
                         "eval.max_problems_per_source; 0 = all)")
    sp.add_argument("--out", required=True, type=output_folder, help="eval folder to write")


def add_commands(sub) -> None:
    """prepare, tokenizer, warmstart, train, evaluate (in this order in `drmas --help`)."""
    _add_data_commands(sub)
    _add_model_commands(sub)
