"""The generated knowledge base the search tests share: its datasets entry and its real
(small) pyserini index, built once per session."""

import json

import pytest

from drmas.data.prepare import prepare_corpus

SPEC = {"kind": "generated", "generator": "knowledge", "entities": 120, "train_problems": 300,
        "test_problems": 20, "sources": {"kb-single": {"hops": 1}, "kb-multi": {"hops": 2}}}


def knowledge_index(tmp_path_factory):
    """(docs, index dir) of the SPEC corpus, built once per session even when several modules ask."""
    pytest.importorskip("pyserini", reason="pyserini is not installed (pyserini==1.6.0)")
    from drmas.retrieval.kinds import build_index

    root = tmp_path_factory.getbasetemp() / "knowledge"
    docs = prepare_corpus(SPEC, seed=0)
    index_dir = root / "index"
    if not index_dir.exists():
        root.mkdir(exist_ok=True)
        corpus = root / "corpus.jsonl"
        corpus.write_text("".join(json.dumps(d) + "\n" for d in docs))
        build_index(corpus, index_dir, threads=2)
    return docs, index_dir
