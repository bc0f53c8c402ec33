# RL runs: one per suite x assignment x method x seed.


rule train:
    input:
        config=CONFIG,
        suite="benchmarks/{suite}.yaml",
        train=f"{RES}/data/{{suite}}/train.jsonl",
        models=models_of,
        index=index_of,
    output:
        f"{RES}/runs/{{suite}}/{{assignment}}/{{method}}/seed{{seed}}/summary.json",
    log:
        f"{RES}/logs/train/{{suite}}_{{assignment}}_{{method}}_seed{{seed}}.log",
    benchmark:
        f"{RES}/benchmarks/train/{{suite}}_{{assignment}}_{{method}}_seed{{seed}}.tsv"
    threads: CFG.threads
    params:
        index=index_arg,
    conda:
        "../envs/drmas.yaml"
    shell:
        "drmas train --threads {threads} --config {input.config} --suite {input.suite} {params.index} --data $(dirname {input.train}) "
        "--assignment {wildcards.assignment} --method {wildcards.method} --seed {wildcards.seed} "
        "--out $(dirname {output}) > {log} 2>&1"
