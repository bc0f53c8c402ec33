# Paper-style tables and figures per suite.


rule table:
    input:
        config=CONFIG,
        suite="benchmarks/{suite}.yaml",
        scores=scores_of,
    output:
        md=f"{RES}/tables/{{suite}}.md",
        tex=f"{RES}/tables/{{suite}}.tex",
        csv=f"{RES}/tables/{{suite}}.csv",
    log:
        f"{RES}/logs/report/{{suite}}_table.log",
    benchmark:
        f"{RES}/benchmarks/report/{{suite}}_table.tsv"
    params:
        out=lambda wc, output: str(Path(output.md).with_suffix("")),
    conda:
        "../envs/drmas.yaml"
    shell:
        "drmas table --config {input.config} --suite {input.suite} --scores {input.scores} "
        "--out {params.out} > {log} 2>&1"


rule figures:
    input:
        config=CONFIG,
        suite="benchmarks/{suite}.yaml",
        runs=runs_of,
    output:
        expand(f"{RES}/figures/{{{{suite}}}}_{{fig}}.png", fig=["grad_norm", "team_reward", "theory_check"]),
    log:
        f"{RES}/logs/report/{{suite}}_figures.log",
    benchmark:
        f"{RES}/benchmarks/report/{{suite}}_figures.tsv"
    params:
        runs=lambda wc, input: " ".join(str(Path(p).parent) for p in input.runs),
        out=lambda wc, output: str(Path(output[0]).parent),
    conda:
        "../envs/drmas.yaml"
    shell:
        "drmas plot --config {input.config} --suite {input.suite} --runs {params.runs} "
        "--out {params.out} > {log} 2>&1"
