"""BM25 search over a pyserini (Lucene) index, and the text agents see for the hits.

Documents follow Search-R1's wiki-18 format: `contents` is "Title\\ntext". A hit is split
the way Search-R1 splits it (first line = title, the rest = text), so `format_docs` gives
exactly the `Doc i(Title: …) …` block upstream puts inside `<information>`.

Java calls go through pyjnius, which attaches every Python thread that touches the JVM and
never detaches it on its own. A `BM25Searcher` therefore runs all its Java calls on one
owner thread: it is safe to call from any thread (the HTTP server calls it from one thread
per request), calls are serialised, and no JVM thread attachments leak.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from drmas.errors import DrmasError


@dataclass(frozen=True)
class Hit:
    """One retrieved document."""

    docid: str
    title: str
    text: str
    score: float

    @property
    def contents(self) -> str:
        """The document as stored in the corpus: "Title\\ntext"."""
        return f"{self.title}\n{self.text}"

    @classmethod
    def from_contents(cls, docid: str, contents: str, score: float) -> "Hit":
        """Split stored contents into title (first line) and text (the rest), as Search-R1 does."""
        title, _, text = contents.partition("\n")
        return cls(docid=str(docid), title=title, text=text, score=float(score))


def format_docs(hits: list[Hit]) -> str:
    """The retrieval block agents read: `Doc i(Title: {title}) {text}\\n` per hit, from 1."""
    return "".join(f"Doc {i}(Title: {h.title}) {h.text}\n" for i, h in enumerate(hits, start=1))


def _close_and_detach(searcher) -> None:
    """Close a LuceneSearcher and detach the calling (owner) thread from the JVM."""
    import jnius

    searcher.close()
    jnius.detach()


class BM25Searcher:
    """In-process BM25 over a Lucene index built by `drmas.retrieval.index.build_index`.

    k1 = 0.9, b = 0.4 are Anserini's (and Search-R1's BM25 retriever's) defaults.
    """

    def __init__(self, index_dir: str | Path, k1: float = 0.9, b: float = 0.4):
        index_dir = Path(index_dir)
        if not any(index_dir.glob("segments_*")):
            raise DrmasError(f"no Lucene index at {index_dir} (build it with `drmas index`)")
        self.index_dir = index_dir
        self.k1, self.b = float(k1), float(b)
        self._owner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bm25-jvm")
        self._searcher = self._call(self._open)

    def _open(self):
        from drmas.retrieval.java import ensure_jvm

        ensure_jvm()
        from pyserini.search.lucene import LuceneSearcher

        searcher = LuceneSearcher(str(self.index_dir))
        searcher.set_bm25(self.k1, self.b)
        return searcher

    def _call(self, fn, *args):
        """Run `fn(*args)` on the owner thread and return its result."""
        return self._owner.submit(fn, *args).result()

    @property
    def num_docs(self) -> int:
        return int(self._searcher.num_docs)

    def search(self, query: str, k: int = 3) -> list[Hit]:
        """Top-k hits for one query, best first (an empty or all-stopword query gives [])."""
        return self.batch_search([query], k=k)[0]

    def batch_search(self, queries: list[str], k: int = 3, threads: int = 1) -> list[list[Hit]]:
        """Top-k hits for each query, in query order; `threads` Java threads search in parallel."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        queries = [str(q) for q in queries]
        if not queries:
            return []
        return self._call(self._batch_search, queries, int(k), max(1, int(threads)))

    def _batch_search(self, queries: list[str], k: int, threads: int) -> list[list[Hit]]:
        # Query ids are positions, so duplicate queries keep their own slots.
        qids = [str(i) for i in range(len(queries))]
        results = self._searcher.batch_search(queries, qids, k=k, threads=threads)
        return [[self._to_hit(h) for h in results.get(qid, [])] for qid in qids]

    @staticmethod
    def _to_hit(scored) -> Hit:
        raw = scored.lucene_document.get("raw")
        if raw is None:
            raise DrmasError("index stores no raw documents; rebuild it with `drmas index`")
        try:
            contents = json.loads(raw)["contents"]
        except (ValueError, KeyError, TypeError):
            contents = raw  # a non-JSON collection: the raw text is the document
        return Hit.from_contents(scored.docid, contents, scored.score)

    def close(self) -> None:
        """Release the index and the owner thread."""
        searcher, self._searcher = self._searcher, None
        if searcher is not None:
            self._call(_close_and_detach, searcher)
        self._owner.shutdown(wait=True)

    def __enter__(self) -> "BM25Searcher":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
