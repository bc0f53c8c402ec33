# Dataset preparation, the tiny models' tokenizer, and the warm starts (tiny models; pretrained
# ones with a `warmstart:` block).


rule prepare:
    priority: 10
    output:
        train=f"{RES}/data/{{suite}}/train.jsonl",
        test=f"{RES}/data/{{suite}}/test.jsonl",
        corpus=f"{RES}/data/{{suite}}/corpus.jsonl",  # the datasets entry's corpus; empty unless the suite searches
    log:
        f"{RES}/logs/prepare/{{suite}}.log",
    resources:
        **job("prepare"),
    benchmark:
        f"{RES}/benchmarks/prepare/{{suite}}.tsv"
    params:
        config=CONFIG,
        key=key_of("prepare"),
        suite=suite_file,
    conda:
        "../envs/drmas.yaml"
    shell:
        "drmas prepare --config {params.config} --suite {params.suite} "
        "--out $(dirname {output.train}) > {log} 2>&1"


rule tokenizer:
    priority: 10
    input:
        train=rules.prepare.output.train,
        index=index_of,
    output:
        directory(f"{RES}/models/{{suite}}/tokenizer"),
    log:
        f"{RES}/logs/tokenizer/{{suite}}.log",
    resources:
        **job("tokenizer"),
    benchmark:
        f"{RES}/benchmarks/tokenizer/{{suite}}.tsv"
    params:
        config=CONFIG,
        key=key_of("tokenizer"),
        suite=suite_file,
        index=index_arg,
    conda:
        "../envs/drmas.yaml"
    shell:
        "drmas tokenizer --config {params.config} --suite {params.suite} {params.index} "
        "--data $(dirname {input.train}) --out {output} > {log} 2>&1"


rule warmstart:
    # before any RL job: the warm starts are the longest jobs, and started last they would
    # leave one core idle at the end of the workflow
    priority: 10
    input:
        train=rules.prepare.output.train,
        base=warmstart_base_of,     # a tiny model's tokenizer, or a converted pretrained model
        index=index_of,
    output:
        directory(f"{RES}/models/{{suite}}/{{model}}"),
    log:
        f"{RES}/logs/warmstart/{{suite}}_{{model}}.log",
    resources:
        **job("warmstart"),
    benchmark:
        f"{RES}/benchmarks/warmstart/{{suite}}_{{model}}.tsv"
    threads: CFG.threads
    params:
        config=CONFIG,
        key=key_of("warmstart"),
        suite=suite_file,
        index=index_arg,
        tokenizer=tokenizer_arg,
    conda:
        "../envs/drmas.yaml"
    shell:
        "drmas warmstart --threads {threads} --config {params.config} --suite {params.suite} "
        "--model {wildcards.model} {params.index} --data $(dirname {input.train}) "
        "{params.tokenizer} --out {output} > {log} 2>&1"
