"""Client of the retrieval service, and the one retriever interface the trainer uses.

`RetrievalClient` speaks Search-R1's `/retrieve` API (so it also works against an upstream
Search-R1 retrieval server). Connection failures, timeouts and 5xx answers are retried a
bounded number of times with exponential backoff (a service that is restarting or busy
recovers); a 4xx is the caller's bug and fails at once. Either way the error is a
DrmasError that names the URL.

`make_retriever` gives the trainer one object with `batch_search(queries, k)` whether the
index is searched in-process (`BM25Searcher`) or over HTTP (`RetrievalClient`).
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Protocol

from drmas.errors import ConfigError, DrmasError
from drmas.retrieval.searcher import BM25Searcher, Hit


class Retriever(Protocol):
    """Anything that returns the top-k hits of each query, in query order; close when done."""

    def batch_search(self, queries: list[str], k: int = 3) -> list[list[Hit]]: ...

    def close(self) -> None: ...


class RetrievalClient:
    """HTTP client of a `/retrieve` service at `url` (e.g. "http://127.0.0.1:8000").

    `timeout_s` bounds each request (a big batch on a big index needs more); `retries` is the
    number of attempts after the first; the waits are backoff_s, 2*backoff_s, 4*backoff_s, ….
    """

    def __init__(self, url: str, timeout_s: float = 10, retries: int = 3, backoff_s: float = 0.5):
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.retries = max(0, int(retries))
        self.backoff_s = backoff_s

    def retrieve(self, queries: list[str], topk: int = 3) -> list[list[Hit]]:
        """Top-`topk` hits for each query, one request for the whole batch."""
        queries = [str(q) for q in queries]
        if not queries:
            return []
        payload = {"queries": queries, "topk": int(topk), "return_scores": True}
        result = self._post("/retrieve", payload).get("result")
        where = f"{self.url}/retrieve"
        if not isinstance(result, list) or len(result) != len(queries):
            raise DrmasError(f"{where}: malformed answer (expected {len(queries)} result lists)")
        try:
            return [[_hit(r) for r in hits] for hits in result]
        except (KeyError, TypeError) as err:
            raise DrmasError(f"{where}: malformed document in answer ({err!r})") from None

    def batch_search(self, queries: list[str], k: int = 3) -> list[list[Hit]]:
        """The `Retriever` interface: same as `retrieve`."""
        return self.retrieve(queries, topk=k)

    def close(self) -> None:
        """Nothing to release (one connection per request); here for the `Retriever` interface."""

    def __enter__(self) -> "RetrievalClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def health(self) -> dict:
        """The service's /health answer (raises DrmasError when it is unreachable)."""
        return self._request(urllib.request.Request(self.url + "/health"), "/health")

    def _post(self, path: str, payload: dict) -> dict:
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(payload).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        return self._request(request, path)

    def _request(self, request: urllib.request.Request, path: str) -> dict:
        where, attempts, last = self.url + path, self.retries + 1, ""
        for attempt in range(attempts):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as err:
                last = f"HTTP {err.code}: {_error_message(err)}"
                if err.code < 500:  # the request itself is wrong: retrying cannot help
                    raise DrmasError(f"{where} rejected the request ({last})") from None
            except (urllib.error.URLError, OSError, http.client.HTTPException) as err:
                # refused, reset, timed out, cut off: the service may be restarting or busy
                last = str(getattr(err, "reason", err)) or type(err).__name__
            except json.JSONDecodeError:
                raise DrmasError(f"{where} answered with something that is not JSON") from None
        raise DrmasError(f"retrieval service {where} failed after {attempts} attempts: {last}")


def _hit(result: dict) -> Hit:
    """A Hit from one Search-R1 result entry {"document": {"id", "contents"}, "score"}."""
    document = result["document"]
    return Hit.from_contents(document["id"], document["contents"], result["score"])


def _error_message(err: urllib.error.HTTPError) -> str:
    """The {"error": …} message of an error answer, or its reason phrase."""
    try:
        return str(json.loads(err.read())["error"])
    except Exception:
        return str(err.reason)


def make_retriever(
    index_dir: str | Path | None = None, url: str | None = None, **kwargs
) -> Retriever:
    """An in-process `BM25Searcher` over `index_dir`, or a `RetrievalClient` of `url`; give one.

    Extra keyword arguments go to the chosen class (k1/b, or timeout_s/retries/backoff_s).
    """
    if (index_dir is None) == (url is None):
        raise ConfigError("retrieval needs exactly one of an index folder or a service URL")
    if url is not None:
        return RetrievalClient(url, **kwargs)
    return BM25Searcher(index_dir, **kwargs)
