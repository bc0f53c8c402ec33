# Input functions shared by the rules (kept apart from the rules, as snakemake --lint asks).


def models_of(wildcards):
    """Warm-started model files an assignment needs (pretrained models need none)."""
    spec = CFG.assignment(wildcards.assignment)
    names = {spec.model_of(a) for a in SUITES[wildcards.suite].agents}
    return [f"{RES}/models/{wildcards.suite}/{m}/model.safetensors"
            for m in sorted(names) if CFG.models[m]["kind"] == "tiny"]


def scores_of(wildcards):
    """Every scores.json a suite's table needs: base and each method, per assignment and seed."""
    return expand(f"{RES}/runs/{wildcards.suite}/{{assignment}}/{{method}}/seed{{seed}}/eval/scores.json",
                  assignment=CFG.assignments, method=["base"] + METHODS, seed=SEEDS)


def runs_of(wildcards):
    """Every RL run of a suite (their metrics.jsonl feed the figures)."""
    return expand(f"{RES}/runs/{wildcards.suite}/{{assignment}}/{{method}}/seed{{seed}}/summary.json",
                  assignment=CFG.assignments, method=METHODS, seed=SEEDS)


def base_twin_of(wildcards):
    """The twin's base scores.json when an earlier assignment plays the same base models
    (drmas.config.Config.base_twin): that evaluation is copied, not run again."""
    twin = CFG.base_twin(wildcards.assignment, SUITES[wildcards.suite].agents)
    if twin is None:
        return []
    return [f"{RES}/runs/{wildcards.suite}/{twin}/base/seed{wildcards.seed}/eval/scores.json"]


def same_as_arg(wildcards, input):
    """`--same-as EVAL_DIR` when the base evaluation is a twin's copy, empty otherwise."""
    return f"--same-as {Path(input.twin[0]).parent}" if input.twin else ""


def index_of(wildcards):
    """The BM25 index a searching suite needs (nothing for the others)."""
    if SUITES[wildcards.suite].retrieval:
        return [f"{RES}/index/{wildcards.suite}/index.done"]
    return []


def index_arg(wildcards, input):
    """`--index DIR` for searching suites, empty otherwise."""
    return f"--index {Path(input.index[0]).parent}" if input.index else ""
