# Dataset preparation and the tiny profile's tokenizer and warm-started models.


rule prepare:
    priority: 10
    input:
        config=CONFIG,
        suite="benchmarks/{suite}.yaml",
    output:
        train=f"{RES}/data/{{suite}}/train.jsonl",
        test=f"{RES}/data/{{suite}}/test.jsonl",
        corpus=f"{RES}/data/{{suite}}/corpus.jsonl",  # empty unless the suite searches
    log:
        f"{RES}/logs/prepare/{{suite}}.log",
    benchmark:
        f"{RES}/benchmarks/prepare/{{suite}}.tsv"
    conda:
        "../envs/drmas.yaml"
    shell:
        "drmas prepare --config {input.config} --suite {input.suite} "
        "--out $(dirname {output.train}) > {log} 2>&1"


rule tokenizer:
    priority: 10
    input:
        config=CONFIG,
        suite="benchmarks/{suite}.yaml",
        train=rules.prepare.output.train,
        index=index_of,
    output:
        f"{RES}/models/{{suite}}/tokenizer/tokenizer.json",
    log:
        f"{RES}/logs/tokenizer/{{suite}}.log",
    benchmark:
        f"{RES}/benchmarks/tokenizer/{{suite}}.tsv"
    params:
        index=index_arg,
    conda:
        "../envs/drmas.yaml"
    shell:
        "drmas tokenizer --config {input.config} --suite {input.suite} {params.index} "
        "--data $(dirname {input.train}) --out $(dirname {output}) > {log} 2>&1"


rule warmstart:
    # before any RL job: the warm starts are the longest jobs, and started last they would
    # leave one core idle at the end of the workflow
    priority: 10
    input:
        config=CONFIG,
        suite="benchmarks/{suite}.yaml",
        train=rules.prepare.output.train,
        tokenizer=rules.tokenizer.output,
        index=index_of,
    output:
        f"{RES}/models/{{suite}}/{{model}}/model.safetensors",
    log:
        f"{RES}/logs/warmstart/{{suite}}_{{model}}.log",
    benchmark:
        f"{RES}/benchmarks/warmstart/{{suite}}_{{model}}.tsv"
    threads: CFG.threads
    params:
        index=index_arg,
    conda:
        "../envs/drmas.yaml"
    shell:
        "drmas warmstart --threads {threads} --config {input.config} --suite {input.suite} --model {wildcards.model} {params.index} "
        "--data $(dirname {input.train}) --tokenizer $(dirname {input.tokenizer}) "
        "--out $(dirname {output}) > {log} 2>&1"
