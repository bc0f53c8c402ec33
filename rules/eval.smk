# Evaluation (n samples per test problem): every RL run, and the warm-started base models
# (an assignment with the same base models as an earlier one copies that base evaluation).


rule evaluate_run:
    input:
        test=f"{RES}/data/{{suite}}/test.jsonl",
        run=rules.train.output,
        index=index_of,
    output:
        scores=f"{RES}/evals/{{suite}}/{{assignment}}/{{method}}/seed{{seed}}/scores.json",
        samples=f"{RES}/evals/{{suite}}/{{assignment}}/{{method}}/seed{{seed}}/samples.jsonl",
    log:
        f"{RES}/logs/eval/{{suite}}_{{assignment}}_{{method}}_seed{{seed}}.log",
    resources:
        **job("evaluate"),
    benchmark:
        f"{RES}/benchmarks/eval/{{suite}}_{{assignment}}_{{method}}_seed{{seed}}.tsv"
    threads: CFG.threads
    params:
        config=CONFIG,
        key=key_of("evaluate"),
        suite=suite_file,
        index=index_arg,
    conda:
        "../envs/drmas.yaml"
    shell:
        "drmas evaluate --threads {threads} --config {params.config} --suite {params.suite} {params.index} "
        "--data $(dirname {input.test}) --assignment {wildcards.assignment} --run {input.run} "
        "--seed {wildcards.seed} --out $(dirname {output.scores}) > {log} 2>&1"


rule evaluate_base:
    input:
        test=f"{RES}/data/{{suite}}/test.jsonl",
        models=models_of,
        index=index_of,
        twin=base_twin_of,
    output:
        scores=f"{RES}/evals/{{suite}}/{{assignment}}/base/seed{{seed}}/scores.json",
        samples=f"{RES}/evals/{{suite}}/{{assignment}}/base/seed{{seed}}/samples.jsonl",
    log:
        f"{RES}/logs/eval/{{suite}}_{{assignment}}_base_seed{{seed}}.log",
    resources:
        **job("evaluate"),
    benchmark:
        f"{RES}/benchmarks/eval/{{suite}}_{{assignment}}_base_seed{{seed}}.tsv"
    threads: CFG.threads
    params:
        config=CONFIG,
        key=key_of("evaluate"),
        suite=suite_file,
        index=index_arg,
        same_as=same_as_arg,
    conda:
        "../envs/drmas.yaml"
    shell:
        "drmas evaluate --threads {threads} --config {params.config} --suite {params.suite} {params.index} "
        "--data $(dirname {input.test}) --assignment {wildcards.assignment} "
        "--seed {wildcards.seed} {params.same_as} --out $(dirname {output.scores}) > {log} 2>&1"
