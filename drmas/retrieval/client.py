"""Client of the retrieval service, and the one retriever interface the trainer uses.

`RetrievalClient` speaks Search-R1's `/retrieve` API (so it also works against an upstream
Search-R1 retrieval server). It keeps a pool of keep-alive connections (httpx) and retries
with exponential backoff (tenacity) what a restarting or busy service causes: refused or cut
connections, timeouts, 5xx answers. A 4xx is the caller's bug and fails at once. Every call
has a total deadline, retries and waits included, so a service that accepts connections but
never answers costs at most `deadline_s`. Failures are DrmasErrors naming the URL; a URL
that is not http(s)://host[:port] is rejected when the client is made.

The service answers a query it cannot search with no hits and an entry in "errors";
`retrieve` logs those and returns [] for them, `retrieve_checked` hands them back.

`Retriever` is the interface a searching MAS calls, `batch_search(queries, k)`: this client
and the in-process searchers (`BM25Searcher`, `DenseSearcher`, opened by `kinds.open_searcher`)
all provide it; training and evaluation use the client (`drmas/rollout/mas.py`).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Protocol

import httpx
import tenacity

from drmas.errors import ConfigError, DrmasError
from drmas.retrieval.searcher import Hit, warn_errors

log = logging.getLogger(__name__)


class Retriever(Protocol):
    """Anything that returns the top-k hits of each query, in query order; close when done."""

    def batch_search(self, queries: list[str], k: int = 3) -> list[list[Hit]]: ...

    def close(self) -> None: ...


class _Retryable(Exception):
    """An attempt that failed in a way a later attempt may not (5xx, connection, timeout)."""


def check_url(url: str) -> str:
    """`url` without a trailing slash; ConfigError unless it is http(s)://host[:port][/path]."""
    try:
        parsed = httpx.URL(str(url).strip())
        ok = parsed.scheme in ("http", "https") and bool(parsed.host)
    except (httpx.InvalidURL, TypeError, ValueError):
        ok = False
    if not ok:
        raise ConfigError(f"retrieval service URL {url!r} is not http(s)://host:port "
                          "(e.g. http://127.0.0.1:8000)")
    return str(url).strip().rstrip("/")


class RetrievalClient:
    """HTTP client of a `/retrieve` service at `url` (e.g. "http://127.0.0.1:8000").

    `timeout_s` bounds each attempt (a big batch on a big index needs more); `retries` is the
    number of attempts after the first, with waits backoff_s, 2*backoff_s, 4*backoff_s, …;
    `deadline_s` bounds the whole call. `connections` is the most connections kept open.
    """

    def __init__(self, url: str, timeout_s: float = 10, retries: int = 3, backoff_s: float = 0.5,
                 deadline_s: float = 30, connections: int = 16):
        self.url = check_url(url)
        self.timeout_s, self.deadline_s = float(timeout_s), float(deadline_s)
        self.retries, self.backoff_s = max(0, int(retries)), float(backoff_s)
        if self.timeout_s <= 0 or self.deadline_s <= 0:
            raise ConfigError("retrieval client timeout and deadline must be positive")
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        # trust_env=False: a proxy set for the internet must not carry loopback traffic
        self._http = httpx.Client(limits=limits, trust_env=False)

    def retrieve(self, queries: list[str], topk: int = 3) -> list[list[Hit]]:
        """Top-`topk` hits for each query ([] for a query the service could not search)."""
        hits, errors = self.retrieve_checked(queries, topk)
        warn_errors(errors)
        return hits

    def retrieve_checked(self, queries: list[str], topk: int = 3
                         ) -> tuple[list[list[Hit]], dict[int, str]]:
        """(hits per query, {query position: error}), one request for the whole batch."""
        queries = [str(q) for q in queries]
        if not queries:
            return [], {}
        payload = {"queries": queries, "topk": int(topk), "return_scores": True}
        answer = self._request("POST", "/retrieve", payload)
        where = f"{self.url}/retrieve"
        result = answer.get("result") if isinstance(answer, dict) else None
        if not isinstance(result, list) or len(result) != len(queries):
            raise DrmasError(f"{where}: malformed answer (expected {len(queries)} result lists)")
        try:
            hits = [[_hit(r) for r in entry] for entry in result]
            errors = {int(e["query"]): str(e["error"]) for e in answer.get("errors") or []}
        except (KeyError, TypeError, ValueError) as err:
            raise DrmasError(f"{where}: malformed document in answer ({err!r})") from None
        return hits, errors

    def batch_search(self, queries: list[str], k: int = 3) -> list[list[Hit]]:
        """The `Retriever` interface: same as `retrieve`."""
        return self.retrieve(queries, topk=k)

    def health(self) -> dict:
        """The service's /health answer (raises DrmasError when it is unreachable)."""
        return self._request("GET", "/health")

    def close(self) -> None:
        """Close the pooled connections."""
        self._http.close()

    def __enter__(self) -> "RetrievalClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _request(self, method: str, path: str, payload: dict | None = None) -> dict:
        where, start = self.url + path, time.monotonic()
        body = None if payload is None else json.dumps(payload).encode()
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(_Retryable),
            stop=tenacity.stop_after_attempt(self.retries + 1)
            | tenacity.stop_before_delay(self.deadline_s),
            # jitter, so that many workers cut off at once do not come back in lockstep
            wait=tenacity.wait_exponential(multiplier=self.backoff_s, exp_base=2)
            + tenacity.wait_random(0, self.backoff_s / 2),
            reraise=True,
        )
        try:
            return retrying(self._attempt, method, where, body, start + self.deadline_s)
        except _Retryable as err:
            attempts = retrying.statistics.get("attempt_number", 1)
            raise DrmasError(f"retrieval service {where} failed after {attempts} attempts "
                             f"({time.monotonic() - start:.1f} s): {err}") from None

    def _attempt(self, method: str, where: str, body: bytes | None, deadline: float) -> dict:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _Retryable(f"deadline of {self.deadline_s:g} s passed")
        try:
            response = self._http.request(
                method, where, content=body, timeout=min(self.timeout_s, left),
                headers={"Content-Type": "application/json"} if body is not None else None)
        except httpx.TimeoutException as err:
            raise _Retryable(f"no answer within {min(self.timeout_s, left):.1f} s "
                             f"({type(err).__name__})") from None
        except httpx.TransportError as err:  # refused, reset, cut off: restarting or busy
            raise _Retryable(str(err) or type(err).__name__) from None
        if response.status_code >= 500:
            raise _Retryable(f"HTTP {response.status_code}: {_error_message(response)}")
        if response.status_code >= 400:
            raise DrmasError(f"{where} rejected the request "
                             f"(HTTP {response.status_code}: {_error_message(response)})")
        try:
            return response.json()
        except ValueError:
            raise DrmasError(f"{where} answered with something that is not JSON") from None


def _hit(result: dict) -> Hit:
    """A Hit from one Search-R1 result entry {"document": {"id", "contents"}, "score"}."""
    document = result["document"]
    return Hit.from_contents(document["id"], document["contents"], result["score"])


def _error_message(response: httpx.Response) -> str:
    """The {"error": …} message of an error answer, or its reason phrase."""
    try:
        return " ".join(str(response.json()["error"]).split())
    except Exception:  # noqa: BLE001  (any other body: fall back to the status line)
        return response.reason_phrase or "no message"
