"""HTTP retrieval service with Search-R1's API, so rollouts on other machines share one index.

    POST /retrieve  {"queries": ["…", …], "topk": 3, "return_scores": true}
        -> {"result": [[{"document": {"id": …, "contents": "Title\\ntext"}, "score": …}, …]]}
           (with "return_scores": false, each inner list holds the documents themselves)
    GET  /health    -> {"status": "ok", "num_docs": N}

Each request is one `batch_search` call. Requests are handled on their own threads; the
searcher serialises its Java calls itself (see `BM25Searcher`). A malformed request gets a
400 with {"error": "…"} and the server carries on; so does an unexpected failure (500).
Only the standard library is used, and the default host is 127.0.0.1.
"""

from __future__ import annotations

import json
import logging
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from drmas.retrieval.searcher import BM25Searcher, Hit

log = logging.getLogger(__name__)

MAX_TOPK = 100
MAX_QUERIES = 10_000
MAX_BODY_BYTES = 16 * 1024 * 1024


class BadRequest(ValueError):
    """The client sent something the API does not accept (answered with 400)."""


def parse_request(body: bytes) -> tuple[list[str], int, bool]:
    """Validate a /retrieve body and return (queries, topk, return_scores)."""
    try:
        request = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise BadRequest(f"body is not valid JSON: {err}") from None
    if not isinstance(request, dict):
        raise BadRequest("body must be a JSON object")
    queries = request.get("queries")
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise BadRequest("'queries' must be a list of strings")
    if len(queries) > MAX_QUERIES:
        raise BadRequest(f"at most {MAX_QUERIES} queries per request, got {len(queries)}")
    topk = request.get("topk", 3)
    if topk is None:
        topk = 3
    if isinstance(topk, bool) or not isinstance(topk, int) or not 1 <= topk <= MAX_TOPK:
        raise BadRequest(f"'topk' must be an integer in [1, {MAX_TOPK}], got {topk!r}")
    return_scores = request.get("return_scores", False)
    if not isinstance(return_scores, bool):
        raise BadRequest("'return_scores' must be true or false")
    return queries, topk, return_scores


def format_result(hits: list[list[Hit]], return_scores: bool) -> dict:
    """Search-R1's response body for per-query hits."""

    def document(h: Hit) -> dict:
        return {"id": h.docid, "contents": h.contents}

    if return_scores:
        return {"result": [[{"document": document(h), "score": h.score} for h in q] for q in hits]}
    return {"result": [[document(h) for h in q] for q in hits]}


class _Handler(BaseHTTPRequestHandler):
    server: "_HTTPServer"

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/health":
            self._reply(200, {"status": "ok", "num_docs": self.server.searcher.num_docs})
        else:
            self._reply(404, {"error": f"unknown path {self.path}; use GET /health"})

    def do_POST(self) -> None:
        if self.path.rstrip("/") != "/retrieve":
            self._reply(404, {"error": f"unknown path {self.path}; use POST /retrieve"})
            return
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._reply(411, {"error": "a Content-Length header is required"})
            return
        if not 0 <= length <= MAX_BODY_BYTES:
            self._reply(413, {"error": f"body must be at most {MAX_BODY_BYTES} bytes"})
            return
        try:
            queries, topk, return_scores = parse_request(self.rfile.read(length))
            hits = self.server.searcher.batch_search(queries, k=topk, threads=self.server.threads)
        except BadRequest as err:
            self._reply(400, {"error": str(err)})
            return
        except Exception as err:  # keep serving; the client sees a 5xx and may retry
            log.exception("retrieval failed")
            self._reply(500, {"error": f"retrieval failed: {type(err).__name__}: {err}"})
            return
        self._reply(200, format_result(hits, return_scores))

    def _reply(self, status: int, payload: dict) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (stdlib signature)
        log.debug("%s %s", self.address_string(), format % args)


class _HTTPServer(ThreadingHTTPServer):
    request_queue_size = 128  # the stdlib default (5) refuses connections under a burst
    searcher: BM25Searcher
    threads: int


class RetrievalServer:
    """A retrieval service bound to (host, port); port 0 picks a free port (see `.port`)."""

    def __init__(self, searcher: BM25Searcher, host: str = "127.0.0.1", port: int = 8000,
                 threads: int = 1):
        self._httpd = _HTTPServer((host, port), _Handler)
        self._httpd.searcher = searcher
        self._httpd.threads = max(1, int(threads))
        self._thread: threading.Thread | None = None

    @property
    def host(self) -> str:
        return self._httpd.server_address[0]

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def serve_forever(self) -> None:
        """Serve until `stop()` (from another thread) or Ctrl-C."""
        log.info("retrieval service on %s (%d documents)", self.url, self._httpd.searcher.num_docs)
        try:
            self._httpd.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            self._httpd.server_close()

    def start(self) -> "RetrievalServer":
        """Serve on a background daemon thread (tests, notebooks) and return self."""
        self._thread = threading.Thread(target=self.serve_forever, name="retrieval", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port; the searcher stays open (the caller owns it)."""
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> "RetrievalServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def serve(index_dir: str | Path, host: str = "127.0.0.1", port: int = 8000, threads: int = 1,
          k1: float = 0.9, b: float = 0.4) -> None:
    """Open the index and serve it until Ctrl-C (`drmas serve`).

    SIGINT is (re)installed as KeyboardInterrupt here: a process started in the background by
    a non-interactive shell inherits SIGINT as *ignored*, and Python then leaves it ignored,
    so such a service could not be stopped with Ctrl-C or `kill -INT` (a CI run started that
    way saw it)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with BM25Searcher(index_dir, k1=k1, b=b) as searcher:
        RetrievalServer(searcher, host=host, port=port, threads=threads).serve_forever()
