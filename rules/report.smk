# Paper-style tables and figures per suite; `snakemake --report results/<profile>/report.html`
# gathers the ones marked report(...) into one page, with the captions shipped in the package
# (drmas/report/captions/), found through it so that a workflow copy finds them too.
import importlib.resources

CAPTIONS = str(importlib.resources.files("drmas.report") / "captions")


rule table:
    input:
        scores=scores_of,
        runs=runs_of,
    output:
        md=f"{RES}/tables/{{suite}}.md",
        tex=f"{RES}/tables/{{suite}}.tex",
        csv=report(f"{RES}/tables/{{suite}}.csv", caption=f"{CAPTIONS}/table.rst",
                   category="Tables", subcategory="{suite}", labels={"suite": "{suite}", "table": "avg@n / pass@n"}),
        behaviour=report(f"{RES}/tables/{{suite}}_behaviour.csv", caption=f"{CAPTIONS}/behaviour.rst",
                         category="Tables", subcategory="{suite}", labels={"suite": "{suite}", "table": "behaviour"}),
        ablations=report(f"{RES}/tables/{{suite}}_ablations.csv", caption=f"{CAPTIONS}/ablations.rst",
                         category="Tables", subcategory="{suite}", labels={"suite": "{suite}", "table": "ablations"}),
        stability=report(f"{RES}/tables/{{suite}}_stability.csv", caption=f"{CAPTIONS}/stability.rst",
                         category="Tables", subcategory="{suite}", labels={"suite": "{suite}", "table": "stability"}),
        efficiency=report(f"{RES}/tables/{{suite}}_efficiency.csv", caption=f"{CAPTIONS}/efficiency.rst",
                          category="Tables", subcategory="{suite}", labels={"suite": "{suite}", "table": "efficiency"}),
        efficiency_md=f"{RES}/tables/{{suite}}_efficiency.md",
        stats=f"{RES}/tables/{{suite}}_stats.csv",      # IQM, probability of improvement
        stats_md=f"{RES}/tables/{{suite}}_stats.md",
        gradnorm=f"{RES}/tables/{{suite}}_gradnorm.csv",   # pre-clip norms against GRPO's
        gradnorm_md=f"{RES}/tables/{{suite}}_gradnorm.md",
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
        "--runs {input.runs} --out {params.out} > {log} 2>&1"


rule figures:
    input:
        runs=runs_of,
    output:
        # one figure per name in drmas.report.names.FIGURES, each with its caption
        **{fig: report(f"{RES}/figures/{{suite}}_{fig}.png", caption=f"{CAPTIONS}/{fig}.rst",
                       category="Figures", subcategory="{suite}",
                       labels={"suite": "{suite}", "figure": fig.replace("_", " ")})
           for fig in FIGURES},
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
        out=lambda wc, output: str(Path(output[0]).parent),
    conda:
        "../envs/drmas.yaml"
    shell:
        "drmas plot --config {params.config} --suite {params.suite} --runs {input.runs} "
        "--out {params.out} > {log} 2>&1"
