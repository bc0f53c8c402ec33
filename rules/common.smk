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


def index_of(wildcards):
    """The BM25 index a searching suite needs (nothing for the others)."""
    if SUITES[wildcards.suite].retrieval:
        return [f"{RES}/index/{wildcards.suite}/index.done"]
    return []


def index_arg(wildcards, input):
    """`--index DIR` for searching suites, empty otherwise."""
    return f"--index {Path(input.index[0]).parent}" if input.index else ""
