# The workflow's last rules: the result card of the run (results/<profile>/card.json: versions,
# machine, numerics fingerprint, data hashes, every table row; drmas/report/card.py), then its
# comparison with the reference card results/reference/<profile>.json (drmas/report/verify.py),
# written beside the card (verify.txt, verify.json) and printed. The verification never fails
# the workflow (`--report-only`): its exit status stays about whether the run succeeded, while
# `drmas verify` run by hand exits 3 on a row outside. See docs/cards.md.


rule card:
    input:
        tables=expand(f"{RES}/tables/{{suite}}{{name}}", suite=SUITES,
                      name=[".csv", "_stats.csv", "_behaviour.csv", "_ablations.csv",
                            "_stability.csv", "_efficiency.csv"]),
        figures=expand(f"{RES}/figures/{{suite}}_{{fig}}.png", suite=SUITES, fig=FIGURES),
    output:
        f"{RES}/card.json",
    log:
        f"{RES}/logs/card.log",
    localrule: True
    threads: CFG.threads
    params:
        results=lambda wc, output: str(Path(output[0]).parent),
    conda:
        "../envs/drmas.yaml"
    shell:
        "drmas card {params.results} --out {output} > {log} 2>&1"


rule verify:
    input:
        rules.card.output,
    output:
        f"{RES}/verify.txt",
    log:
        f"{RES}/logs/verify.log",
    localrule: True
    conda:
        "../envs/drmas.yaml"
    shell:
        "drmas verify {input} --out {output} --report-only > {log} 2>&1; cat {output}"
