"""HTTP retrieval service with Search-R1's API, so rollouts on other machines share one index.

    POST /retrieve  {"queries": ["…", …], "topk": 3, "return_scores": true}
        -> {"result": [[{"document": {"id": …, "contents": "Title\\ntext"}, "score": …}, …]],
            "errors": [{"query": 1, "error": "…"}]}
           (with "return_scores": false, each inner list holds the documents themselves)
    POST /retrieve  {"query": "…", "topk": 3, "return_scores": true}
        -> the same body with one inner list: the single-query form that the paper's search
           tool (SkyRL's `call_search_api`) posts, answered as its server does (`result[0]`
           holds the query's documents)
    GET  /health    -> {"status": "ok", "num_docs": N, "kind": "bm25" | "dense",
                        "jvm_max_heap_mb": the JVM's heap cap}

FastAPI + uvicorn serve it, as Search-R1's own retrieval server does. The body is validated
by the pydantic model `RetrieveRequest` straight from the raw bytes (pydantic's JSON parser
bounds nesting depth and rejects invalid UTF-8 and lone surrogates), so anything that is not
a well-formed request gets a 400 with {"error": "…"}; a body over `MAX_BODY_BYTES` gets 413.
A query the engine cannot search (say, more distinct terms than Lucene's clause limit) gets
no hits and an entry in "errors"; the other queries of the batch are answered as usual.

Requests that arrive while the engine is busy are searched together: `Batcher` hands the
waiting queries to one engine call (BM25: one Anserini batch over `threads` Java threads, at
most `MAX_BATCH_QUERIES` queries), so many small concurrent requests cost about as much as a
few big ones. Queries are independent, so coalescing never changes a query's hits.
`drmas perf retrieval` measures the service's queries/s against another service.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import signal
import socket
import threading
from dataclasses import dataclass
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from starlette.exceptions import HTTPException

from drmas.errors import DrmasError
from drmas.retrieval.searcher import Hit

log = logging.getLogger(__name__)

MAX_TOPK = 100
MAX_QUERIES = 10_000
MAX_BODY_BYTES = 16 * 1024 * 1024
# Queries one coalesced engine call takes: Anserini's cost per query was measured about 2x
# higher in batches of 512 than of 64, and the service's queries/s highest with 64.
MAX_BATCH_QUERIES = 64


class RetrieveRequest(BaseModel):
    """The body of POST /retrieve: Search-R1's batch (`queries`) or the paper's search tool's
    single `query`, exactly one of them (other fields are ignored)."""

    model_config = ConfigDict(strict=True, extra="ignore")

    queries: list[str] | None = Field(default=None, max_length=MAX_QUERIES, description="search queries (Search-R1's batch form)")
    query: str | None = Field(default=None, description="one search query (the paper's search tool's form)")
    topk: int | None = Field(default=3, ge=1, le=MAX_TOPK, description="hits per query")
    return_scores: bool = Field(default=False, description="wrap each document with its score")

    @model_validator(mode="after")
    def _one_form(self) -> "RetrieveRequest":
        if (self.queries is None) == (self.query is None):
            raise ValueError("give either 'queries' (a list of strings) or 'query' (one string), not both or neither")
        return self

    @property
    def batch(self) -> list[str]:
        """The queries to search, whichever form the request used."""
        return self.queries if self.queries is not None else [self.query]


def parse_request(body: bytes) -> RetrieveRequest:
    """The validated request; ValueError with a one-line message when the body is not one."""
    try:
        return RetrieveRequest.model_validate_json(body)
    except ValidationError as err:
        raise ValueError(_describe(err)) from None


def _describe(err: ValidationError) -> str:
    first = err.errors(include_url=False)[0]
    if first["type"] == "json_invalid":
        reason = first["msg"].removeprefix("Invalid JSON: ")
        hint = " (a \\uD800-\\uDFFF escape must be half of a surrogate pair)" \
            if "hex escape" in reason or "surrogate" in reason else ""
        return f"body is not valid JSON: {reason}{hint}"
    if not first["loc"]:
        if first["type"] == "value_error":     # _one_form: neither or both forms
            return first["msg"].removeprefix("Value error, ")
        return "body must be a JSON object {\"queries\": [...], \"topk\": k} or {\"query\": \"...\", \"topk\": k}"
    name, *rest = first["loc"]
    where = f"'{name}'" + "".join(f"[{part}]" for part in rest)
    more = f" (and {err.error_count() - 1} more errors)" if err.error_count() > 1 else ""
    return f"{where}: {first['msg']}{more}"


def format_result(hits: list[list[Hit]], return_scores: bool,
                  errors: dict[int, str] | None = None) -> dict:
    """Search-R1's response body for per-query hits, plus the per-query errors."""

    def document(h: Hit) -> dict:
        return {"id": h.docid, "contents": h.contents}

    if return_scores:
        result = [[{"document": document(h), "score": h.score} for h in q] for q in hits]
    else:
        result = [[document(h) for h in q] for q in hits]
    return {"result": result,
            "errors": [{"query": i, "error": e} for i, e in sorted((errors or {}).items())]}


@dataclass
class _Job:
    queries: list[str]
    k: int
    future: asyncio.Future


class Batcher:
    """Runs the engine on the event loop's thread; the requests waiting meanwhile go together.

    The engine call blocks the loop on purpose: requests that arrive during a search wait in
    the kernel's buffers and are read, all at once, into the next engine call. Running the
    engine on a second Python thread instead makes the loop's socket operations wait for the
    GIL behind it (measured on 2 cores: about half the queries/s under 64 clients). Engine
    calls take at most `max_queries` queries: a big request is searched in slices, so small
    requests arriving meanwhile are answered between them rather than after it."""

    def __init__(self, searcher, threads: int = 1, max_queries: int = MAX_BATCH_QUERIES):
        self.searcher, self.threads, self.max_queries = searcher, max(1, int(threads)), max_queries
        self._pending: collections.deque[_Job] = collections.deque()
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task | None = None

    async def search(self, queries: list[str], k: int) -> tuple[list[list[Hit]], dict[int, str]]:
        """(hits per query, {position: error}) for one request's queries."""
        loop = asyncio.get_running_loop()
        if self._task is None:
            self._wakeup = asyncio.Event()
            self._task = loop.create_task(self._loop())
        step = self.max_queries
        jobs = [_Job(queries[i : i + step], k, loop.create_future())
                for i in range(0, len(queries), step)]
        self._pending.extend(jobs)
        self._wakeup.set()
        hits: list[list[Hit]] = []
        errors: dict[int, str] = {}
        for start, (part, found) in zip(range(0, len(queries), step),
                                        await asyncio.gather(*(j.future for j in jobs))):
            hits += part
            errors.update({start + i: e for i, e in found.items()})
        return hits, errors

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _loop(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            await asyncio.sleep(0)  # requests read in this same loop turn join the batch
            while self._pending:
                jobs, size = [], 0
                while self._pending and size + len(self._pending[0].queries) <= self.max_queries:
                    jobs.append(self._pending.popleft())
                    size += len(jobs[-1].queries)
                for k in sorted({j.k for j in jobs}):
                    self._run([j for j in jobs if j.k == k], k)
                await asyncio.sleep(0)  # answer these, read what came in meanwhile

    def _run(self, jobs: list[_Job], k: int) -> None:
        queries = [q for j in jobs for q in j.queries]
        try:
            hits, errors = self.searcher.search_checked(queries, k, self.threads)
        except Exception as err:  # noqa: BLE001  (the requests get a 500, the loop lives)
            for j in jobs:
                if not j.future.done():
                    j.future.set_exception(err)
            return
        start = 0
        for j in jobs:
            end = start + len(j.queries)
            if not j.future.done():  # a client that went away cancelled its future
                j.future.set_result((hits[start:end],
                                     {i - start: e for i, e in errors.items() if start <= i < end}))
            start = end


def create_app(searcher, threads: int = 1):
    """The FastAPI application serving `searcher` (which the caller keeps and closes)."""
    batcher = Batcher(searcher, threads)
    heap_mb = jvm_max_heap_mb()  # fixed for the JVM's life; asked once, from this thread
    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        await batcher.close()

    app = FastAPI(title="drmas retrieval", description=__doc__.splitlines()[0],
                  redirect_slashes=False, lifespan=lifespan)

    def error(status: int, message: str) -> JSONResponse:
        return JSONResponse({"error": message}, status_code=status)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException):
        if exc.status_code == 404:
            return error(404, f"unknown path {request.url.path}; use POST /retrieve or GET /health")
        return error(exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception):
        log.error("retrieval failed", exc_info=exc)
        return error(500, f"retrieval failed: {type(exc).__name__}: {exc}")

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "num_docs": searcher.num_docs, "kind": searcher.kind,
                "jvm_max_heap_mb": heap_mb}

    request_schema = {"requestBody": {"required": True, "content": {
        "application/json": {"schema": RetrieveRequest.model_json_schema()}}}}

    @app.post("/retrieve", openapi_extra=request_schema)
    @app.post("/retrieve/", include_in_schema=False)
    async def retrieve(request: Request) -> Response:
        body = await _read_body(request)
        if body is None:
            return error(413, f"body must be at most {MAX_BODY_BYTES} bytes")
        try:
            req = parse_request(body)
        except ValueError as err:
            return error(400, str(err))
        hits, errors = await batcher.search(req.batch, req.topk or 3)
        payload = format_result(hits, req.return_scores, errors)
        return Response(json.dumps(payload).encode(), media_type="application/json")

    return app


def jvm_max_heap_mb() -> int | None:
    """The JVM's heap cap in MiB (Runtime.maxMemory), or None when no JVM runs here."""
    import sys

    if "jnius" not in sys.modules:
        return None
    from jnius import autoclass

    return int(autoclass("java.lang.Runtime").getRuntime().maxMemory()) // 2**20


async def _read_body(request) -> bytes | None:
    """The request body, or None once it passes MAX_BODY_BYTES (announced or streamed)."""
    try:
        if int(request.headers.get("content-length", 0)) > MAX_BODY_BYTES:
            return None
    except ValueError:
        pass  # a malformed header: uvicorn rejects it before we get here
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on (host, port); DrmasError in one line when that is impossible."""
    if not 0 <= int(port) <= 65535:
        raise DrmasError(f"port {port} is out of range (0-65535)")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except (socket.gaierror, UnicodeError) as err:
        raise DrmasError(f"cannot listen on host {host!r}: {getattr(err, 'strerror', err) or err}") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # not past a live listener
        sock.bind(address)
        sock.listen(2048)
    except OSError as err:
        sock.close()
        raise DrmasError(f"cannot listen on {host}:{port}: {err.strerror or err}") from None
    return sock


class RetrievalServer:
    """A retrieval service bound to (host, port); port 0 picks a free port (see `.port`)."""

    def __init__(self, searcher, host: str = "127.0.0.1", port: int = 8000, threads: int = 1,
                 sock: socket.socket | None = None):
        import uvicorn

        self.searcher = searcher
        self._socket = sock if sock is not None else bind(host, port)
        config = uvicorn.Config(create_app(searcher, threads), log_level="warning",
                                access_log=False, timeout_keep_alive=30)
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def host(self) -> str:
        return self._socket.getsockname()[0]

    @property
    def port(self) -> int:
        return self._socket.getsockname()[1]

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def serve_forever(self) -> None:
        """Serve until `stop()` (from another thread), Ctrl-C or SIGTERM."""
        log.info("retrieval service on %s (%s, %d documents)", self.url, self.searcher.kind,
                 self.searcher.num_docs)
        try:
            self._server.run(sockets=[self._socket])
        finally:
            self._socket.close()

    def start(self) -> "RetrievalServer":
        """Serve on a background daemon thread (tests, notebooks) and return self."""
        self._thread = threading.Thread(target=self.serve_forever, name="retrieval", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port; the searcher stays open (the caller owns it)."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._socket.close()

    def __enter__(self) -> "RetrievalServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def serve(index_dir: str | Path, host: str = "127.0.0.1", port: int = 8000, threads: int = 1,
          kind: str = "auto", encoder: str | Path | None = None, jvm_heap: str | None = "1g",
          device: str | None = None, k1: float = 0.9, b: float = 0.4) -> None:
    """Open the index and serve it until Ctrl-C or SIGTERM (`drmas serve`).

    The port is taken before the index is opened, so a port in use or a bad host fails at
    once. SIGINT is (re)installed as KeyboardInterrupt here: a process started in the
    background by a non-interactive shell inherits SIGINT as *ignored*, and Python then leaves
    it ignored, so such a service could not be stopped with Ctrl-C or `kill -INT` (a CI run
    started that way saw it). uvicorn catches the signal, drains the open requests, and hands
    it back once it has stopped."""
    from drmas.retrieval.java import check_heap
    from drmas.retrieval.kinds import open_searcher

    if jvm_heap is not None:
        check_heap(jvm_heap)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sock = bind(host, port)
    try:
        with open_searcher(index_dir, kind=kind, encoder=encoder, max_heap=jvm_heap,
                           device=device, k1=k1, b=b) as searcher:
            server = RetrievalServer(searcher, threads=threads, sock=sock)
            print(f"serving a {searcher.kind} index of {searcher.num_docs} documents on "
                  f"{server.url} (Ctrl-C stops)", flush=True)
            server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    log.info("retrieval service stopped")
