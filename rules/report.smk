# Paper-style tables and figures per suite; `snakemake --report results/<profile>/report.html`
# gathers the ones marked report(...) into one page, with the captions shipped in the package
# (drmas/report/captions/), found through it so that a workflow copy finds them too.
import importlib.resources

CAPTIONS = str(importlib.resources.files("drmas.report") / "captions")


rule table:
    input:
        scores=scores_of,
    output:
        md=f"{RES}/tables/{{suite}}.md",
        tex=f"{RES}/tables/{{suite}}.tex",
        csv=report(f"{RES}/tables/{{suite}}.csv", caption=f"{CAPTIONS}/table.rst",
                   category="Tables", subcategory="{suite}", labels={"suite": "{suite}", "table": "avg@n / pass@n"}),
        behaviour=report(f"{RES}/tables/{{suite}}_behaviour.csv", caption=f"{CAPTIONS}/behaviour.rst",
                         category="Tables", subcategory="{suite}", labels={"suite": "{suite}", "table": "behaviour"}),
    log:
        f"{RES}/logs/report/{{suite}}_table.log",
    resources:
        **job("report"),
    benchmark:
        f"{RES}/benchmarks/report/{{suite}}_table.tsv"
    params:
        config=CONFIG,
        key=key_of("report"),
        suite=suite_file,
        out=lambda wc, output: str(Path(output.md).with_suffix("")),
    conda:
        "../envs/drmas.yaml"
    shell:
        "drmas table --config {params.config} --suite {params.suite} --scores {input.scores} "
        "--out {params.out} > {log} 2>&1"


rule figures:
    input:
        runs=runs_of,
    output:
        grad_norm=report(f"{RES}/figures/{{suite}}_grad_norm.png", caption=f"{CAPTIONS}/grad_norm.rst",
                         category="Figures", subcategory="{suite}", labels={"suite": "{suite}", "figure": "grad norm"}),
        team_reward=report(f"{RES}/figures/{{suite}}_team_reward.png", caption=f"{CAPTIONS}/team_reward.rst",
                           category="Figures", subcategory="{suite}", labels={"suite": "{suite}", "figure": "team reward"}),
        theory_check=report(f"{RES}/figures/{{suite}}_theory_check.png", caption=f"{CAPTIONS}/theory_check.rst",
                            category="Figures", subcategory="{suite}", labels={"suite": "{suite}", "figure": "theory check"}),
        theory_csv=f"{RES}/figures/{{suite}}_theory_check.csv",
    log:
        f"{RES}/logs/report/{{suite}}_figures.log",
    resources:
        **job("report"),
    benchmark:
        f"{RES}/benchmarks/report/{{suite}}_figures.tsv"
    params:
        config=CONFIG,
        key=key_of("report"),
        suite=suite_file,
        out=lambda wc, output: str(Path(output.grad_norm).parent),
    conda:
        "../envs/drmas.yaml"
    shell:
        "drmas plot --config {params.config} --suite {params.suite} --runs {input.runs} "
        "--out {params.out} > {log} 2>&1"
