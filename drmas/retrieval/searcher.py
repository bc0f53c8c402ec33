"""BM25 search over a pyserini (Lucene) index, and the text agents see for the hits.

Documents follow Search-R1's wiki-18 format: `contents` is "Title\\ntext". A hit is split
the way Search-R1 splits it (first line = title, the rest = text), so `format_docs` gives
exactly the `Doc i(Title: …) …` block upstream puts inside `<information>`.

Java calls go through pyjnius, which attaches every Python thread that touches the JVM and
never detaches it on its own. A `BM25Searcher` therefore runs all its Java calls on one
owner thread: it is safe to call from any thread, calls are serialised, and no JVM thread
attachments leak.

One bad query never fails its batch: `search_checked` isolates the queries a search engine
rejects (e.g. more distinct terms than Lucene's clause limit) and reports an error for each
of them alone; the others keep exactly the hits a clean batch gives them.
"""

from __future__ import annotations

import json
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from drmas.errors import DrmasError

log = logging.getLogger(__name__)


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


def isolate_failures(
    search: Callable[[list[str]], list[list[Hit]]],
    search_one: Callable[[str], list[Hit]],
    queries: list[str],
) -> tuple[list[list[Hit]], dict[int, str]]:
    """Hits of every query and an error message for each query that cannot be searched.

    `search` runs a whole batch and fails as a whole if any query fails (Anserini does);
    on failure the batch is split in halves and each half retried, down to single queries,
    which `search_one` runs to get that query's own error. With f bad queries among n this
    costs O(n + f·log n) searches instead of n single ones.
    """
    hits: list[list[Hit]] = [[] for _ in queries]
    errors: dict[int, str] = {}

    def run(lo: int, hi: int) -> None:
        try:
            hits[lo:hi] = search(queries[lo:hi])
            return
        except Exception as err:  # noqa: BLE001  (any engine error: split and retry)
            if hi - lo > 1:
                mid = (lo + hi) // 2
                run(lo, mid)
                run(mid, hi)
                return
            first = err
        try:
            hits[lo] = search_one(queries[lo])
        except Exception as err:  # noqa: BLE001
            errors[lo] = query_error_message(err)
        else:  # it only failed in company: keep the single search's answer
            log.warning("query %d failed in a batch but not alone (%s)", lo, first)

    if queries:
        run(0, len(queries))
    return hits, errors


def query_error_message(err: Exception) -> str:
    """One line saying why a query could not be searched."""
    classname = str(getattr(err, "classname", "") or "")
    if classname.endswith("TooManyClauses"):
        return ("query has more distinct terms than Lucene's clause limit "
                f"({getattr(err, 'innermessage', '') or 'maxClauseCount'}); shorten it")
    if isinstance(err, UnicodeError):
        return f"query is not valid Unicode text ({getattr(err, 'reason', err)})"
    text = str(getattr(err, "innermessage", None) or err).strip().splitlines()
    return f"{classname or type(err).__name__}: {text[0] if text else 'no message'}"


def warn_errors(errors: dict[int, str]) -> None:
    """Log each per-query error (callers that only want hits get [] for those queries)."""
    for i, message in sorted(errors.items()):
        log.warning("query %d not searched: %s", i, message)


class AnseriniSearcher:
    """Anserini's `SimpleSearcher`, the Java class that pyserini's `LuceneSearcher` wraps,
    reached through pyserini's JVM bridge (`pyserini.pyclass`) with the same calls and results.

    Why not `LuceneSearcher` itself: importing `pyserini.search.lucene` runs a package init
    that loads pyserini's neural encoders, hence torch and transformers, which a BM25 search
    never uses. That import took 9 s of CPU on a 2-core machine, and every search job (each
    training run and evaluation starts its own retrieval service) paid it: about a tenth of
    the default profile. `tests/retrieval/test_retrieval.py` checks that the hits equal
    `LuceneSearcher`'s. Call it from one thread (`BM25Searcher` keeps it on its owner thread).
    """

    def __init__(self, index_dir: str | Path):
        from pyserini.pyclass import autoclass

        self._list = autoclass("java.util.ArrayList")
        self._java = autoclass("io.anserini.search.SimpleSearcher")(str(index_dir))
        self.num_docs = int(self._java.get_total_num_docs())

    def set_bm25(self, k1: float, b: float) -> None:
        self._java.set_bm25(float(k1), float(b))

    def search(self, query: str, k: int) -> list:
        """Anserini's ScoredDoc hits (docid, score, lucene_document), best first."""
        return list(self._java.search(query, int(k)))

    def batch_search(self, queries: list[str], qids: list[str], k: int, threads: int) -> dict:
        """{qid: ScoredDoc hits} for every query, searched on `threads` Java threads."""
        java_queries, java_qids = self._list(), self._list()
        for query, qid in zip(queries, qids, strict=True):
            java_queries.add(query)
            java_qids.add(qid)
        results = self._java.batch_search(java_queries, java_qids, int(k), int(threads))
        return {e.getKey(): list(e.getValue()) for e in results.entrySet().toArray()}

    def close(self) -> None:
        self._java.close()


def _close_and_detach(searcher) -> None:
    """Close an AnseriniSearcher and detach the calling (owner) thread from the JVM."""
    import jnius

    searcher.close()
    jnius.detach()


class Searcher:
    """What every retriever offers: `search_checked` (hits and per-query errors), with
    `search` and `batch_search` on top of it. A kind implements `_search_checked` on inputs
    already checked here, and keeps its engine in `_searcher` (which gives `num_docs`)."""

    def search(self, query: str, k: int = 3) -> list[Hit]:
        """Top-k hits for one query, best first (an empty or all-stopword query gives [])."""
        return self.batch_search([query], k=k)[0]

    def batch_search(self, queries: list[str], k: int = 3, threads: int = 1) -> list[list[Hit]]:
        """Top-k hits for each query, in query order; `threads` search in parallel.

        A query that cannot be searched gets [] and a logged warning (see `search_checked`)."""
        hits, errors = self.search_checked(queries, k, threads)
        warn_errors(errors)
        return hits

    def search_checked(self, queries: list[str], k: int = 3, threads: int = 1
                       ) -> tuple[list[list[Hit]], dict[int, str]]:
        """(hits per query, {query position: error message}) for the queries that failed."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        queries = [str(q) for q in queries]
        if not queries:
            return [], {}
        return self._search_checked(queries, int(k), max(1, int(threads)))

    def _search_checked(self, queries: list[str], k: int, threads: int
                        ) -> tuple[list[list[Hit]], dict[int, str]]:
        """`search_checked` on a non-empty list of strings, k >= 1 and threads >= 1."""
        raise NotImplementedError

    @property
    def num_docs(self) -> int:
        return int(self._searcher.num_docs)


class BM25Searcher(Searcher):
    """In-process BM25 over a Lucene index built by `drmas.retrieval.index.build_index`.

    k1 = 0.9, b = 0.4 are Anserini's (and Search-R1's BM25 retriever's) defaults.
    """

    kind = "bm25"

    def __init__(self, index_dir: str | Path, k1: float = 0.9, b: float = 0.4,
                 max_heap: str | None = None):
        index_dir = Path(index_dir)
        if not any(index_dir.glob("segments_*")):
            raise DrmasError(f"no Lucene index at {index_dir} (build it with `drmas index`)")
        self.index_dir = index_dir
        self.k1, self.b = float(k1), float(b)
        self.max_heap = max_heap
        self._owner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bm25-jvm")
        self._searcher = self._call(self._open)

    def _open(self):
        from drmas.retrieval.java import ensure_jvm

        ensure_jvm(self.max_heap)
        searcher = AnseriniSearcher(self.index_dir)
        searcher.set_bm25(self.k1, self.b)
        return searcher

    def _call(self, fn, *args):
        """Run `fn(*args)` on the owner thread and return its result."""
        return self._owner.submit(fn, *args).result()

    def _search_checked(self, queries: list[str], k: int, threads: int
                        ) -> tuple[list[list[Hit]], dict[int, str]]:
        return self._call(isolate_failures, lambda qs: self._batch_search(qs, k, threads),
                          lambda q: self._search_one(q, k), queries)

    def _batch_search(self, queries: list[str], k: int, threads: int) -> list[list[Hit]]:
        # Query ids are positions, so duplicate queries keep their own slots.
        qids = [str(i) for i in range(len(queries))]
        results = self._searcher.batch_search(queries, qids, k, threads)
        return [[self._to_hit(h) for h in results.get(qid, [])] for qid in qids]

    def _search_one(self, query: str, k: int) -> list[Hit]:
        return [self._to_hit(h) for h in self._searcher.search(query, k)]

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
