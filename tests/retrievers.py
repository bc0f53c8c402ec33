"""In-memory retrievers for the MAS tests: they stand in for BM25 search (tested for real in
tests/retrieval/ and tests/data/test_knowledge.py) to check routing, batching and prompts."""

from drmas.retrieval.searcher import Hit


class FakeRetriever:
    """Title lookup over a dict; records every batch_search call."""

    def __init__(self, docs):
        self.docs, self.calls = docs, []

    def batch_search(self, queries, k=3):
        self.calls.append(list(queries))
        return [[Hit(q, q, self.docs[q], 1.0)] if q in self.docs else [] for q in queries]


class FixedRetriever:
    """The same `hits` for every query; with `expect`, asserts the queries are exactly it."""

    def __init__(self, hits, expect=None):
        self.hits, self.expect = list(hits), expect

    def batch_search(self, queries, k=3):
        if self.expect is not None:
            assert queries == self.expect
        return [list(self.hits) for _ in queries]
