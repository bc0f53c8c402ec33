# Input functions and per-job config keys shared by the rules (kept apart from the rules, as
# snakemake --lint asks).


def suite_file(wildcards):
    return str(suite_path(wildcards.suite))


def key_of(stage):
    """`params.key` of a rule: the config slice its job reads (drmas/config/stages.py), as JSON."""
    def key(wildcards):
        suite = SUITES[wildcards.suite]
        if stage == "prepare":
            return stages.as_param(stages.prepare_key(CFG, suite))
        if stage == "tokenizer":
            return stages.as_param(stages.tokenizer_key(CFG, suite))
        if stage == "warmstart":
            return stages.as_param(stages.warmstart_key(CFG, suite, wildcards.model))
        if stage == "train":
            return stages.as_param(stages.train_key(CFG, suite, wildcards.assignment,
                                                    wildcards.method, wildcards.seed))
        if stage == "evaluate":
            method = getattr(wildcards, "method", "base")
            return stages.as_param(stages.eval_key(CFG, suite, wildcards.assignment, method,
                                                   wildcards.seed))
        return stages.as_param(stages.report_key(CFG, suite))
    return key


def index_flags(wildcards):
    """`drmas index` options from the config's `retrieval:` block."""
    r = CFG.retrieval
    if r.kind == "bm25":
        return "--kind bm25"
    flags = (f"--kind dense --encoder {r.encoder} --batch-size {r.encode_batch_size} "
             f"--max-length {r.max_length}")
    return flags + (f" --device {r.device}" if r.device else "")


def models_of(wildcards):
    """Model folders an assignment needs: warm-started models (tiny ones, pretrained ones with
    a `warmstart:` block), and pretrained ones that the workflow converts from GGUF (other
    pretrained models are loaded from their `path`)."""
    spec = CFG.assignment(wildcards.assignment)
    names = sorted({spec.model_of(a) for a in SUITES[wildcards.suite].agents})
    warm = [f"{RES}/models/{wildcards.suite}/{m}" for m in names if CFG.warm_started(m)]
    converted = sorted({str(Path(CFG.models[m].path)) for m in names
                        if CFG.models[m].gguf is not None and not CFG.warm_started(m)})
    return warm + converted


def warmstart_base_of(wildcards):
    """What a warm start starts from: a tiny model's suite tokenizer (the model itself is
    built from its config); a pretrained model's folder when the workflow converts it."""
    spec = CFG.models[wildcards.model]
    if spec.kind == "tiny":
        return [f"{RES}/models/{wildcards.suite}/tokenizer"]
    return [str(Path(spec.path))] if spec.gguf is not None else []


def tokenizer_arg(wildcards, input):
    """`--tokenizer DIR` for tiny models (their `base` input); a pretrained model brings its own."""
    return f"--tokenizer {input.base[0]}" if CFG.models[wildcards.model].kind == "tiny" else ""


# GGUF conversions (rules/convert.smk): folder under results/<profile>/models/ -> `gguf` value.
CONVERTED = CFG.converted_models()
CONVERTED_PATTERN = "|".join(re.escape(f) for f in CONVERTED) or "(?!)"   # (?!): no folder


def gguf_input(wildcards):
    """The GGUF file a conversion reads, when it is a file (a packaged model is none)."""
    from drmas.models.gguf import KNOWN_GGUF

    gguf = CONVERTED[wildcards.converted]
    return [] if gguf in KNOWN_GGUF else [gguf]


def scores_of(wildcards):
    """Every scores.json a suite's table needs: each method per assignment and seed, and the
    base models per assignment at the first seed only: they do not depend on the RL seed, so
    evaluating them again per seed would cost a job per seed for sampling noise alone."""
    pattern = f"{RES}/evals/{wildcards.suite}/{{assignment}}/{{method}}/seed{{seed}}/scores.json"
    assignments = SUITE_CFG[wildcards.suite].assignments
    return (expand(pattern, assignment=assignments, method=["base"], seed=SEEDS[:1])
            + expand(pattern, assignment=assignments, method=SUITE_CFG[wildcards.suite].methods,
                     seed=SEEDS))


def runs_of(wildcards):
    """Every RL run folder of a suite (their metrics.jsonl feed the figures)."""
    return expand(f"{RES}/runs/{wildcards.suite}/{{assignment}}/{{method}}/seed{{seed}}",
                  assignment=SUITE_CFG[wildcards.suite].assignments,
                  method=SUITE_CFG[wildcards.suite].methods, seed=SEEDS)


def base_twin_of(wildcards):
    """The twin's base scores.json when an earlier assignment plays the same base models
    (drmas.config.profile.Config.base_twin): that evaluation is copied, not run again."""
    twin = SUITE_CFG[wildcards.suite].base_twin(wildcards.assignment, SUITES[wildcards.suite].agents)
    if twin is None:
        return []
    return [f"{RES}/evals/{wildcards.suite}/{twin}/base/seed{wildcards.seed}/scores.json"]


def same_as_arg(wildcards, input):
    """`--same-as EVAL_DIR` when the base evaluation is a twin's copy, empty otherwise."""
    return f"--same-as {Path(input.twin[0]).parent}" if input.twin else ""


def index_of(wildcards):
    """The search index a searching suite needs (nothing for the others)."""
    if SUITES[wildcards.suite].retrieval:
        return [f"{RES}/index/{wildcards.suite}"]
    return []


def index_arg(wildcards, input):
    """`--index DIR` for searching suites, empty otherwise."""
    return f"--index {input.index[0]}" if input.index else ""


def job(rule):
    """Scheduler resources of a rule's jobs (drmas.config.profile.Config.job_resources_for)."""
    res = CFG.job_resources_for(rule)
    return {"gpu": res.gpus, "mem_mb": res.mem_mb, "runtime": res.runtime}
