"""`drmas perf retrieval`: queries/s of a retrieval service under concurrent clients.

The load generator speaks only the Search-R1 HTTP API, so it measures any service the same
way: the one `drmas serve` starts over `--index`, one already running (`--url`), and a peer
(`--peer-url`, e.g. an older version) in the same run, with the same queries in the same
order. Each of N clients (asyncio tasks over an aiohttp pool of N keep-alive connections;
httpx's async pool was measured to collapse to ~50 requests/s at 64 connections) sends
`batch_size` queries per request, back to back, for `seconds`; queries/s counts the queries
answered with 200. Before timing, the services' answers to the same queries are compared and
each service is warmed up under the same load (a fresh JVM is several times slower until it
has compiled its hot code), so that a long-running service is not compared with a cold one.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from pathlib import Path

import httpx

from drmas.data.io import atomic_write_text, read_jsonl
from drmas.errors import DataError, DrmasError


def load_queries(path: str | Path) -> list[str]:
    """Queries from a JSONL file: each row's `question`, else the title line of `contents`."""
    rows = read_jsonl(path)
    queries = [str(r.get("question") or str(r.get("contents") or "").split("\n")[0]) for r in rows]
    queries = [q for q in queries if q.strip()]
    if not queries:
        raise DataError(f"{path}: no `question` or `contents` to use as queries")
    return queries


async def _run_load(url: str, queries: list[str], clients: int, seconds: float,
                    batch_size: int, topk: int = 3, warmup_s: float = 1.0) -> dict:
    import aiohttp

    answered, failed, latencies = [0], [0], []
    connector = aiohttp.TCPConnector(limit=clients)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:

        async def client(c: int, stop_at: float) -> None:
            at = (c * 7919 * batch_size) % len(queries)  # clients start at different places
            while time.perf_counter() < stop_at:
                batch = [queries[(at + j) % len(queries)] for j in range(batch_size)]
                at += batch_size
                start = time.perf_counter()
                try:
                    async with http.post(f"{url}/retrieve", json={
                            "queries": batch, "topk": topk, "return_scores": True}) as response:
                        await response.read()
                        ok = response.status == 200
                except (aiohttp.ClientError, asyncio.TimeoutError):
                    ok = False
                latencies.append(time.perf_counter() - start)
                if ok:
                    answered[0] += len(batch)
                else:
                    failed[0] += 1

        warm_until = time.perf_counter() + warmup_s
        await asyncio.gather(*(client(c, warm_until) for c in range(clients)))
        answered[0], failed[0] = 0, 0  # that was the warm-up
        latencies.clear()
        begin = time.perf_counter()
        await asyncio.gather(*(client(c, begin + seconds) for c in range(clients)))
        elapsed = time.perf_counter() - begin
    ordered = sorted(latencies)
    return {"clients": clients, "queries_per_s": answered[0] / elapsed,
            "requests": len(latencies), "failed_requests": failed[0],
            "p50_ms": 1000 * statistics.median(ordered) if ordered else None,
            "p95_ms": 1000 * ordered[int(0.95 * (len(ordered) - 1))] if ordered else None}


def measure(url: str, queries: list[str], clients: int, seconds: float = 10.0,
            batch_size: int = 8, warmup_s: float = 1.0) -> dict:
    """Queries/s (and request latency) of the service at `url` under `clients` clients,
    after `warmup_s` seconds of the same load that are not counted."""
    return asyncio.run(_run_load(url.rstrip("/"), queries, clients, seconds, batch_size,
                                 warmup_s=warmup_s))


def answers(url: str, queries: list[str], topk: int = 3) -> list[list[str]]:
    """The docids the service returns for `queries` (to check two services agree)."""
    with httpx.Client(timeout=120, trust_env=False) as http:
        response = http.post(f"{url.rstrip('/')}/retrieve",
                             json={"queries": queries, "topk": topk, "return_scores": True})
    if response.status_code != 200:
        raise DrmasError(f"{url}/retrieve answered HTTP {response.status_code}")
    return [[hit["document"]["id"] for hit in hits] for hits in response.json()["result"]]


def main_retrieval(queries: str | None, index: str | None = None, url: str | None = None,
                   peer_url: str | None = None, clients=(8, 64), seconds: float = 10.0,
                   batch_size: int = 8, threads: int = 1, warmup_s: float = 10.0,
                   rounds: int = 5, out: str | None = None) -> dict:
    """Measure the service (`index` served by a child `drmas serve`, or `url`) and `peer_url`.

    Each is first warmed up for `warmup_s` seconds under 8 clients. Then, per client count,
    `rounds` rounds each give every service `seconds / rounds` of load, in alternating order;
    a service's queries/s is its median over the rounds and the ratio is the median of the
    per-round ratios, so a burst of other work on a shared machine moves one round, not all.
    """
    from drmas.retrieval.local import LocalService

    if not queries:
        raise DrmasError("perf retrieval needs --queries (a JSONL of questions or a corpus)")
    if (index is None) == (url is None):
        raise DrmasError("perf retrieval needs exactly one of --index or --url")
    texts = load_queries(queries)
    rounds = max(1, int(rounds))
    service = LocalService(index, threads=threads) if index else None
    try:
        target = service.client.url if service else url.rstrip("/")
        services = {"service": target, **({"peer": peer_url.rstrip("/")} if peer_url else {})}
        check = texts[:64]
        reference = answers(target, check)
        same = {name: answers(u, check) == reference for name, u in services.items()}
        for u in services.values():  # the JVM compiles its hot code after ~10^4 queries
            measure(u, texts, 8, seconds=0.1, batch_size=batch_size, warmup_s=warmup_s)
        rows = []
        for n in clients:
            for r in range(rounds):
                order = list(services.items())[:: 1 if r % 2 == 0 else -1]
                for name, u in order:
                    rows.append({"name": name, "clients": n, "round": r, **measure(
                        u, texts, n, seconds / rounds, batch_size, warmup_s=0.5)})
            for name in services:
                mine = [x for x in rows if x["name"] == name and x["clients"] == n]
                print(f"{name:8s} {n:3d} clients: {_median(mine, 'queries_per_s'):9.1f} "
                      f"queries/s (median of {rounds}: {_spread(mine)}; "
                      f"p50 {_median(mine, 'p50_ms'):.1f} ms, p95 {_median(mine, 'p95_ms'):.1f} "
                      f"ms; {sum(x['failed_requests'] for x in mine)} failed requests)", flush=True)
    finally:
        if service is not None:
            service.close()
    result = {"queries": len(texts), "batch_size": batch_size, "seconds": seconds,
              "rounds": rounds, "warmup_s": warmup_s, "threads": threads,
              "same_answers": same, "rows": rows,
              "queries_per_s": {name: {n: _median([x for x in rows if x["name"] == name
                                                   and x["clients"] == n], "queries_per_s")
                                       for n in clients} for name in services}}
    if peer_url:
        result["ratio"] = {}
        for n in clients:
            per_round = [a["queries_per_s"] / b["queries_per_s"] for a, b in zip(
                *([x for x in rows if x["name"] == name and x["clients"] == n]
                  for name in ("service", "peer"))) if b["queries_per_s"] > 0]
            result["ratio"][n] = statistics.median(per_round) if per_round else None
            print(f"{n:3d} clients: service / peer = {result['ratio'][n]:.2f}x (median of "
                  f"per-round ratios {', '.join(f'{x:.2f}' for x in per_round)})")
    print(f"same top-3 answers on {len(check)} queries: {same}")
    if out:
        atomic_write_text(out, json.dumps(result, indent=1) + "\n")
    return result


def _median(rows: list[dict], key: str) -> float:
    values = [r[key] for r in rows if r[key] is not None]
    return statistics.median(values) if values else float("nan")


def _spread(rows: list[dict]) -> str:
    values = sorted(r["queries_per_s"] for r in rows)
    return f"{values[0]:.0f}-{values[-1]:.0f}"
