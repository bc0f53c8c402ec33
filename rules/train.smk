# RL runs: one per suite x assignment x method x seed. The run folder is the job's output
# (Snakemake removes it before a rerun); checkpoints live apart, under checkpoints/, and are
# resumed only by a run with the same identity (drmas/config/stages.py train_key).


rule train:
    input:
        train=f"{RES}/data/{{suite}}/train.jsonl",
        models=models_of,
        index=index_of,
    output:
        directory(f"{RES}/runs/{{suite}}/{{assignment}}/{{method}}/seed{{seed}}"),
    log:
        f"{RES}/logs/train/{{suite}}_{{assignment}}_{{method}}_seed{{seed}}.log",
    resources:
        **job("train"),
    benchmark:
        f"{RES}/benchmarks/train/{{suite}}_{{assignment}}_{{method}}_seed{{seed}}.tsv"
    threads: CFG.threads
    params:
        config=CONFIG,
        key=key_of("train"),
        suite=suite_file,
        index=index_arg,
        checkpoints=f"{RES}/checkpoints/{{suite}}/{{assignment}}/{{method}}/seed{{seed}}",
    conda:
        "../envs/drmas.yaml"
    shell:
        "drmas train --threads {threads} --config {params.config} --suite {params.suite} {params.index} "
        "--data $(dirname {input.train}) --assignment {wildcards.assignment} "
        "--method {wildcards.method} --seed {wildcards.seed} --out {output} "
        "--checkpoints {params.checkpoints} > {log} 2>&1"
