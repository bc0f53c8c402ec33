"""The HTTP retrieval service (Search-R1 API) and its client, on 127.0.0.1."""

import json
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from drmas.errors import DrmasError
from drmas.net import free_port
from drmas.retrieval.client import RetrievalClient


def post(url: str, body: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_serve_runs_as_its_own_process(bm25_index, searcher, tmp_path):
    """`serve()` (what `drmas serve` runs) answers like the in-process searcher; Ctrl-C stops it."""
    port = free_port()
    code = f"from drmas.retrieval.server import serve; serve({str(bm25_index[1])!r}, port={port})"
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=out, stderr=subprocess.STDOUT)
    try:
        client = RetrievalClient(f"http://127.0.0.1:{port}", retries=0, timeout_s=5)
        deadline = time.monotonic() + 90
        while True:
            try:
                assert client.health()["num_docs"] == len(bm25_index[0])
                break
            except DrmasError:
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, "service did not come up"
                time.sleep(0.2)
        queries = ["guild lore", "comet chroniclers", "nothing-matches-this"]
        assert client.retrieve(queries, topk=3) == searcher.batch_search(queries, k=3)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            status = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            status = proc.wait()
    assert status == 0, log.read_text()  # Ctrl-C is a clean stop, not a JVM abort


def test_health(service):
    assert service.host == "127.0.0.1" and service.port > 0
    assert RetrievalClient(service.url).health()["status"] == "ok"


def test_concurrent_clients_get_the_in_process_results(bm25_index, searcher, service):
    rows, _ = bm25_index
    titles = [r["contents"].split("\n")[0] for r in rows]
    mixed = [f"{a.split()[0]} {b.split()[-1]} lore" for a, b in zip(titles, titles[100:])]
    queries = (titles + mixed)[:500]
    expected = searcher.batch_search(queries, k=3)

    def one_client(worker: int) -> list[list]:
        client = RetrievalClient(service.url, timeout_s=30)
        chunk = 25  # many requests in flight at once, each a batch
        start = worker * 7  # clients walk the batch from different offsets
        order = queries[start:] + queries[:start]
        got = []
        for i in range(0, len(order), chunk):
            got += client.retrieve(order[i : i + chunk], topk=3)
        return got[len(order) - start :] + got[: len(order) - start]

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(one_client, range(8)))
    for got in results:
        assert len(got) == len(queries)
        for hits, want in zip(got, expected):
            assert [(h.docid, h.title, h.text) for h in hits] == [
                (h.docid, h.title, h.text) for h in want
            ]
            assert [h.score for h in hits] == pytest.approx([h.score for h in want])


def test_search_r1_response_shapes(service, searcher):
    url = service.url + "/retrieve"
    request = {"queries": ["guild lore"], "topk": 2, "return_scores": True}
    status, body = post(url, json.dumps(request).encode())
    assert status == 200
    [[first, second]] = body["result"]
    want = searcher.search("guild lore", k=2)[0]
    assert first["document"] == {"id": want.docid, "contents": want.contents}
    assert first["score"] >= second["score"]
    status, body = post(url, json.dumps({"queries": ["guild lore", "river"], "topk": 1}).encode())
    assert status == 200
    assert body["result"][0] == [{"id": want.docid, "contents": want.contents}]
    assert len(body["result"]) == 2


@pytest.mark.parametrize(
    "body, message",
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "JSON object"),
        (b'{"topk": 3}', "'queries'"),
        (b'{"queries": "one query"}', "'queries'"),
        (b'{"queries": ["a", 3]}', "'queries'"),
        (b'{"queries": ["a"], "topk": 0}', "'topk'"),
        (b'{"queries": ["a"], "topk": 1000}', "'topk'"),
        (b'{"queries": ["a"], "topk": "3"}', "'topk'"),
        (b'{"queries": ["a"], "return_scores": "yes"}', "'return_scores'"),
    ],
)
def test_malformed_request_is_rejected_and_service_keeps_serving(service, body, message):
    status, answer = post(service.url + "/retrieve", body)
    assert 400 <= status < 500
    assert message in answer["error"]
    assert len(RetrievalClient(service.url).retrieve(["guild lore"], topk=3)[0]) == 3


def test_unknown_path_is_404(service):
    status, answer = post(service.url + "/search", b"{}")
    assert status == 404 and "/retrieve" in answer["error"]


def test_client_does_not_retry_a_rejected_request(service):
    client = RetrievalClient(service.url, retries=5, backoff_s=10)  # a retry would hang the test
    with pytest.raises(DrmasError, match=r"rejected the request \(HTTP 400: .*'topk'"):
        client.retrieve(["guild lore"], topk=0)


def test_client_gives_up_after_bounded_retries_on_a_stopped_service():
    url = f"http://127.0.0.1:{free_port()}"
    client = RetrievalClient(url, retries=2, backoff_s=0.01, timeout_s=2)
    start = time.monotonic()
    with pytest.raises(DrmasError, match="failed after 3 attempts") as err:
        client.batch_search(["anything"], k=3)
    assert url in str(err.value)
    assert time.monotonic() - start < 5


def test_client_retries_server_errors_then_succeeds():
    """A service that answers 503 twice (e.g. still loading) is retried with backoff."""
    calls = []

    class Flaky(BaseHTTPRequestHandler):
        def do_POST(self):
            calls.append(self.rfile.read(int(self.headers["Content-Length"])))
            ok = len(calls) > 2
            body = {"result": [[{"document": {"id": "d1", "contents": "T\nx"}, "score": 1.0}]]}
            payload = json.dumps(body if ok else {"error": "warming up"}).encode()
            self.send_response(200 if ok else 503)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Flaky)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}"
        client = RetrievalClient(url, retries=3, backoff_s=0.01)
        [[hit]] = client.retrieve(["q"], topk=1)
        assert (hit.docid, hit.title, hit.text, hit.score) == ("d1", "T", "x", 1.0)
        assert len(calls) == 3
        client = RetrievalClient(client.url, retries=0)
        calls.clear()
        with pytest.raises(DrmasError, match=r"failed after 1 attempts \(.*\): HTTP 503: warming up"):
            client.retrieve(["q"])
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_local_service_child_matches_in_process(bm25_index, searcher):
    """The trainer's retriever: `drmas serve` in a child process, same results as in-process."""
    from drmas.retrieval.local import LocalService

    rows, index_dir = bm25_index
    queries = [r["contents"].split("\n")[0] for r in rows[:20]]
    with LocalService(index_dir) as service:
        got = service.batch_search(queries, k=3)
        proc = service._proc
    assert [[h.docid for h in hits] for hits in got] == \
        [[h.docid for h in hits] for hits in searcher.batch_search(queries, k=3)]
    assert proc.poll() is not None                     # closed with its context


def test_local_service_bad_index_fails_clearly(tmp_path):
    from drmas.retrieval.local import LocalService

    with pytest.raises(DrmasError, match="retrieval service exited at start"):
        LocalService(tmp_path / "no_index", startup_timeout_s=60)


def test_client_keeps_one_connection_for_many_requests():
    """Pooled keep-alive connections: sequential requests share one TCP connection."""
    connections = []

    class KeepAlive(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self):
            connections.append(self.client_address)
            super().setup()

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            payload = json.dumps({"result": [[]]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), KeepAlive)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        with RetrievalClient(f"http://127.0.0.1:{httpd.server_address[1]}") as client:
            for _ in range(5):
                assert client.retrieve(["q"]) == [[]]
        assert len(connections) == 1
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_perf_retrieval_measures_service_and_peer(service, tmp_path, capsys):
    """`drmas perf retrieval` on one service as both sides: same answers, both measured."""
    from drmas.bench.retrieval import main_retrieval

    queries = tmp_path / "q.jsonl"
    queries.write_text("".join(json.dumps({"question": q}) + "\n" for q in ["guild lore", "river"]))
    result = main_retrieval(str(queries), url=service.url, peer_url=service.url, clients=[2],
                            seconds=0.6, batch_size=2, warmup_s=0.2, rounds=2,
                            out=str(tmp_path / "p.json"))
    assert result["same_answers"] == {"service": True, "peer": True}
    assert [(r["name"], r["clients"], r["round"]) for r in result["rows"]] == [
        ("service", 2, 0), ("peer", 2, 0), ("peer", 2, 1), ("service", 2, 1)]
    assert all(r["queries_per_s"] > 0 and r["failed_requests"] == 0 for r in result["rows"])
    assert json.loads((tmp_path / "p.json").read_text())["ratio"] == {"2": result["ratio"][2]}
    assert "service / peer" in capsys.readouterr().out


def test_request_without_content_length_is_served(service, searcher):
    """A chunked body (no Content-Length header): the hand-written server of earlier versions
    answered 411; the ASGI server reads the chunks and answers like any request."""
    import httpx

    def chunks():
        yield b'{"queries": ["guild lore"], '
        yield b'"topk": 3}'

    response = httpx.post(service.url + "/retrieve", content=chunks(), timeout=30,
                          headers={"Content-Type": "application/json"})
    assert "content-length" not in response.request.headers
    assert response.request.headers["transfer-encoding"] == "chunked"
    want = searcher.search("guild lore", k=3)
    assert response.status_code == 200
    assert [d["id"] for d in response.json()["result"][0]] == [h.docid for h in want]


def test_800_concurrent_requests_all_answered_right(bm25_index, searcher, service):
    """800 one-query requests from 32 threads at once: every answer is the in-process one."""
    rows, _ = bm25_index
    titles = [r["contents"].split("\n")[0] for r in rows]
    queries = [titles[i % len(titles)] for i in range(800)]
    expected = {q: [h.docid for h in hits] for q, hits in zip(queries, searcher.batch_search(queries, k=3))}
    client = RetrievalClient(service.url, timeout_s=60)

    def ask(query: str) -> tuple[str, list[str]]:
        return query, [h.docid for h in client.retrieve([query], topk=3)[0]]

    with ThreadPoolExecutor(max_workers=32) as pool:
        answers = list(pool.map(ask, queries))
    assert len(answers) == 800
    assert all(got == expected[q] for q, got in answers)
