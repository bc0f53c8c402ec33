# Search index of a searching suite's corpus (drmas/retrieval/): BM25, or dense (an e5-style
# encoder and a FAISS flat index) with `retrieval: {kind: dense, encoder: ...}`.
# The corpus is the one `drmas prepare` wrote: the generated knowledge base (default profile),
# wiki-18 from the hub or a local copy (paper), the packaged Wikipedia summaries (smol).


rule index:
    priority: 10
    input:
        corpus=f"{RES}/data/{{suite}}/corpus.jsonl",
    output:
        # `drmas index` builds the index beside this folder and renames it into place only
        # when complete, so the folder exists only for a finished index.
        directory(f"{RES}/index/{{suite}}"),
    log:
        f"{RES}/logs/index/{{suite}}.log",
    resources:
        **job("index"),
    benchmark:
        f"{RES}/benchmarks/index/{{suite}}.tsv"
    # One thread, as the other jobs: a job that asks for more waits until that many cores are
    # free at once, which in a busy workflow is the end. wiki-18 (21M passages) wants more:
    # `snakemake --set-threads index=16`.
    threads: CFG.threads
    params:
        key=lambda wc: stages.as_param(stages.index_key(CFG)),
        flags=index_flags,
    conda:
        "../envs/drmas.yaml"
    shell:
        "drmas index --corpus {input.corpus} --out {output} --threads {threads} {params.flags} "
        "> {log} 2>&1"
