"""Bad inputs to the retrieval service, its client and `drmas serve`: each gets a clear,
bounded answer and never costs the other queries of a batch their hits."""

import json
import logging
import socket
import subprocess
import sys
import time

import httpx
import pytest

from drmas.errors import ConfigError, DrmasError
from drmas.net import free_port
from drmas.retrieval.client import RetrievalClient

LONG = " ".join(f"term{i}x" for i in range(1100))     # over Lucene's 1,024-clause limit
HUGE = " ".join(f"w{i}" for i in range(20_000))


def post(url: str, body: bytes, timeout: float = 30) -> tuple[int, dict]:
    response = httpx.post(url + "/retrieve", content=body, timeout=timeout,
                          headers={"Content-Type": "application/json"})
    return response.status_code, response.json()


def titles(bm25_index, n=12):
    return [r["contents"].split("\n")[0] for r in bm25_index[0][:n]]


def still_serves(service, searcher):
    got = RetrievalClient(service.url).retrieve(["guild lore"], topk=3)
    assert got == [searcher.search("guild lore", k=3)]


def as_json(hits):
    """Hits as the service sends them (scores through JSON)."""
    return [{"document": {"id": h.docid, "contents": h.contents}, "score": h.score} for h in hits]


@pytest.mark.parametrize("bad_at", [[0], [5], [2, 7, 11]])
def test_over_long_queries_fail_alone(bm25_index, searcher, service, bad_at):
    queries = titles(bm25_index)
    for i in bad_at:
        queries[i] = HUGE if i == 7 else LONG
    status, body = post(service.url, json.dumps(
        {"queries": queries, "topk": 3, "return_scores": True}).encode())
    assert status == 200
    assert [e["query"] for e in body["errors"]] == bad_at
    assert all("clause limit" in e["error"] for e in body["errors"])
    for i, (query, hits) in enumerate(zip(queries, body["result"])):
        if i in bad_at:
            assert hits == []
        else:  # each good query: exactly what it gets searched on its own
            assert hits == as_json(searcher.search(query, k=3))


def test_big_request_is_searched_in_slices_with_errors_in_place(bm25_index, searcher, service):
    """150 queries (three engine slices of at most 64) with bad ones in each slice."""
    from drmas.retrieval.server import MAX_BATCH_QUERIES

    queries = [r["contents"].split("\n")[0] for r in bm25_index[0][:150]]
    bad = [3, MAX_BATCH_QUERIES + 6, 149]
    for i in bad:
        queries[i] = LONG
    hits, errors = RetrievalClient(service.url).retrieve_checked(queries, topk=2)
    assert sorted(errors) == bad
    good = [i for i in range(150) if i not in bad]
    assert [hits[i] for i in good] == searcher.batch_search([queries[i] for i in good], k=2)
    assert all(hits[i] == [] for i in bad)


def test_client_reports_per_query_errors(bm25_index, searcher, service, caplog):
    queries = ["guild lore", LONG, "comet chroniclers"]
    client = RetrievalClient(service.url)
    hits, errors = client.retrieve_checked(queries, topk=3)
    assert list(errors) == [1] and "clause limit" in errors[1]
    assert hits == [searcher.search("guild lore", k=3), [], searcher.search("comet chroniclers", k=3)]
    with caplog.at_level(logging.WARNING):
        assert client.retrieve(queries, topk=3) == hits
    assert "query 1 not searched" in caplog.text


def test_in_process_search_isolates_a_bad_query(bm25_index, searcher):
    queries = titles(bm25_index, 6) + [LONG]
    hits, errors = searcher.search_checked(queries, k=3, threads=2)
    assert list(errors) == [6]
    assert hits[:6] == [searcher.search(q, k=3) for q in queries[:6]] and hits[6] == []
    assert searcher.batch_search(queries, k=3)[:6] == hits[:6]


@pytest.mark.parametrize(
    "body, message",
    [
        (b'{"queries": ["\\ud800 lone surrogate"]}', "surrogate pair"),
        (b'{"queries": ["\\udc00"], "topk": 3}', "not valid JSON"),
        (b'{"queries": ["caf\xe9"]}', "not valid JSON"),                  # latin-1, not UTF-8
        (b'{"queries": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "recursion limit"),
        (b'{"queries": ["guild lore"', "not valid JSON"),
        (b"", "not valid JSON"),
        (b'"queries"', "JSON object"),
        (b'{"queries": ["a"], "topk": 2.5}', "'topk'"),
        (b'{"queries": ["a"], "topk": true}', "'topk'"),
        (b'{"queries": [["a"]]}', "'queries'[0]"),
        (b'{"queries": ["a"], "return_scores": 1}', "'return_scores'"),
    ],
)
def test_undecodable_body_is_400_and_service_keeps_serving(service, searcher, body, message):
    start = time.monotonic()
    status, answer = post(service.url, body)
    assert status == 400, answer
    assert message in answer["error"] and "\n" not in answer["error"]
    assert time.monotonic() - start < 20  # generous: the real cost is milliseconds
    still_serves(service, searcher)


def test_too_many_queries_and_oversized_body(service, searcher):
    status, answer = post(service.url, json.dumps({"queries": ["a"] * 10_001}).encode())
    assert status == 400 and "'queries'" in answer["error"]
    status, answer = post(service.url, b'{"queries": ["' + b"a" * (17 * 2**20) + b'"]}')
    assert status == 413 and "at most" in answer["error"]
    still_serves(service, searcher)


def test_client_fails_within_its_deadline_on_a_silent_listener():
    with socket.socket() as silent:  # accepts connections (the kernel does), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        client = RetrievalClient(url, timeout_s=10, retries=5, backoff_s=0.5, deadline_s=2)
        start = time.monotonic()
        with pytest.raises(DrmasError, match="failed after .* attempts") as err:
            client.retrieve(["anything"])
        elapsed = time.monotonic() - start
    assert url in str(err.value) and "no answer within" in str(err.value)
    assert elapsed < 10  # the deadline (2 s), not 6 attempts x 10 s


@pytest.mark.parametrize("url", ["localhost:8000", "127.0.0.1:8000", "ftp://127.0.0.1:8000",
                                 "http://", "", "http//127.0.0.1:8000"])
def test_url_without_scheme_or_host_is_one_line_and_not_retried(url):
    start = time.monotonic()
    with pytest.raises(ConfigError, match=r"is not http\(s\)://host:port") as err:
        RetrievalClient(url, retries=5, backoff_s=10)
    assert "\n" not in str(err.value) and time.monotonic() - start < 1


def run_serve(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "drmas.cli", "serve", *args],
                          capture_output=True, text=True, timeout=timeout)


def one_line_exit_2(proc) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_serve_on_a_port_in_use_is_one_line(bm25_index):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        line = one_line_exit_2(run_serve("--index", str(bm25_index[1]), "--port", str(port)))
    assert line.startswith("drmas serve: error: cannot listen on 127.0.0.1:")
    assert "in use" in line


@pytest.mark.parametrize("args, message", [
    (["--host", "no-such-host.invalid"], "cannot listen on host 'no-such-host.invalid'"),
    (["--host", "10.255.255.1"], "cannot listen on 10.255.255.1"),   # not this machine's
    (["--port", "70000"], "argument --port: must be between 0 and 65535, got 70000"),
    (["--jvm-heap", "lots"], "JVM heap 'lots' is not a size"),
    (["--kind", "dense"], "holds a bm25 index, not a dense one"),
])
def test_serve_bad_arguments_are_one_line(bm25_index, args, message):
    line = one_line_exit_2(run_serve("--index", str(bm25_index[1]), "--port", str(free_port()), *args))
    assert message in line


def test_serve_caps_the_jvm_heap(bm25_index):
    from drmas.retrieval.local import LocalService

    with LocalService(bm25_index[1], jvm_heap="192m") as service:
        health = service.client.health()
    assert health["kind"] == "bm25" and 0 < health["jvm_max_heap_mb"] <= 192
