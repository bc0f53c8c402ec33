"""The two kinds of retrieval index, BM25 (Lucene, `index.py` and `searcher.py`) and dense
(e5 + FAISS, `dense.py`): building one by kind, telling which kind a folder holds, and opening
the searcher for it. The factories live here, above the kinds they build, so that each kind's
module imports only the shared helpers below it (no import cycle).
"""

from __future__ import annotations

from pathlib import Path

from drmas.errors import ConfigError, DrmasError
from drmas.retrieval.dense import DENSE_META, DenseSearcher, build_dense_index
from drmas.retrieval.index import build_bm25_index
from drmas.retrieval.searcher import BM25Searcher

KINDS = ("bm25", "dense")


def index_kind(index_dir: str | Path) -> str:
    """"bm25" for a Lucene index folder, "dense" for one built by `drmas index --kind dense`."""
    index_dir = Path(index_dir)
    if any(index_dir.glob("segments_*")):
        return "bm25"
    if (index_dir / DENSE_META).is_file():
        return "dense"
    raise DrmasError(f"no retrieval index at {index_dir} (build it with `drmas index`)")


def open_searcher(index_dir: str | Path, kind: str = "auto", encoder: str | Path | None = None,
                  max_heap: str | None = None, device: str | None = None,
                  k1: float = 0.9, b: float = 0.4):
    """A BM25Searcher or DenseSearcher over `index_dir`; kind "auto" reads it from the folder.

    `encoder` overrides the query encoder a dense index names; `max_heap` caps the JVM heap
    (BM25, and pyserini's import for dense); `device` is where the dense encoder runs."""
    if kind not in ("auto", *KINDS):
        raise DrmasError(f"unknown retriever kind {kind!r}; use one of auto, {', '.join(KINDS)}")
    found = index_kind(index_dir)
    if kind != "auto" and kind != found:
        raise DrmasError(f"{index_dir} holds a {found} index, not a {kind} one")
    if found == "bm25":
        return BM25Searcher(index_dir, k1=k1, b=b, max_heap=max_heap)
    return DenseSearcher(index_dir, encoder=encoder, device=device, max_heap=max_heap)


def build_index(corpus_jsonl: str | Path, index_dir: str | Path, threads: int = 1,
                kind: str = "bm25", encoder: str | Path | None = None, **dense) -> Path:
    """Build a `kind` index ("bm25", or "dense" with `encoder`) of a corpus into `index_dir`.

    Extra keyword arguments go to `build_dense_index` (batch_size, max_length, device)."""
    if kind == "bm25":
        if encoder is not None or dense:
            raise ConfigError("--encoder and the encoding options are for --kind dense")
        return build_bm25_index(corpus_jsonl, index_dir, threads)
    if kind == "dense":
        if encoder is None:
            raise ConfigError("a dense index needs --encoder (a local e5-style encoder folder)")
        return build_dense_index(corpus_jsonl, index_dir, encoder, **dense)
    raise ConfigError(f"unknown index kind {kind!r}; use bm25 or dense")
