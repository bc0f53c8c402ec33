"""Benchmarks behind `drmas perf`: the vectorised advantage estimator against the paper's
row-loop style, on a synthetic batch shaped like a multi-turn search run.

The loop (``upstream_loop_advantages``) is the speed anchor (ARCHITECTURE.md, "Upstream
semantics matched"): a Python loop over rows holding torch scalars in dicts of lists, as in
the paper's public code (about 40k rows/s here; the goal is at least 50x that). It
is written here from the semantics, in that style, and also serves as a second reference
for the results.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict

import numpy as np
import torch

from drmas.algos.advantages import compute_advantages
from drmas.registry import ESTIMATORS

AGENT_NAMES = ("verifier", "searcher", "answerer")


def upstream_loop_advantages(scores, uid, traj_uid, agent, mean_by, std_by, norm_by_std, eps):
    """Advantages computed the upstream way: one Python iteration per row.

    Same semantics as ``compute_advantages`` with pools ``mean_by``/``std_by`` ("global",
    "agent", "first_row"), rows in batch order. Scalars are float64 (upstream holds float32),
    so that zero-variance groups agree with the vectorised version instead of showing
    float32 rounding noise divided by eps; the speed does not depend on the dtype.
    """
    scores = torch.as_tensor(scores, dtype=torch.float64)
    bsz = scores.shape[0]
    traj2scores = defaultdict(list)
    for i in range(bsz):
        traj2scores[(uid[i], traj_uid[i])].append(scores[i])
    traj2mean = {key: torch.mean(torch.tensor(vals, dtype=torch.float64)) for key, vals in traj2scores.items()}

    pools = {"global": defaultdict(list), "agent": defaultdict(list),
             "first_row": defaultdict(list)}
    per_traj = {"global", "first_row"} & {mean_by, std_by}
    seen = set()
    for i in range(bsz):
        key = (uid[i], traj_uid[i])
        if per_traj and key not in seen:          # a trajectory's first row in batch order
            seen.add(key)
            pools["global"][uid[i]].append(traj2mean[key])
            pools["first_row"][uid[i]].append(scores[i])
        if "agent" in (mean_by, std_by):
            pools["agent"][(uid[i], agent[i])].append(scores[i])

    id2mean, id2std = {}, {}
    for mode in {mean_by, std_by}:
        for idx, vals in pools[mode].items():
            if len(vals) == 1:
                id2mean[mode, idx] = torch.tensor(0.0, dtype=torch.float64)
                id2std[mode, idx] = torch.tensor(1.0, dtype=torch.float64)
            else:
                group = torch.tensor(vals, dtype=torch.float64)
                id2mean[mode, idx] = torch.mean(group)
                id2std[mode, idx] = torch.std(group)

    out = torch.zeros(bsz, dtype=torch.float64)
    for i in range(bsz):
        pool_id = {"global": uid[i], "first_row": uid[i], "agent": (uid[i], agent[i])}
        score = traj2mean[(uid[i], traj_uid[i])] if mean_by == "global" else scores[i]
        adv = score - id2mean[mean_by, pool_id[mean_by]]
        if norm_by_std:
            adv = adv / (id2std[std_by, pool_id[std_by]] + eps)
        out[i] = adv
    return out.float()


def synthetic_batch(rows: int, seed: int = 0, n: int = 8, agents: int = 3):
    """A batch of ``rows`` agent calls as Python lists, like the trainer hands over.

    About 12.5 calls per trajectory (multi-turn, agents speaking several times), n
    trajectories per uid, hence rows // (12.5 n) uids. Team reward 1/0 per trajectory with
    a per-uid success rate (so some groups have zero variance), minus 0.1 for 10% invalid
    calls. uid and agent are strings (uuid4-like, role names), traj_uid ints.
    """
    rng = np.random.default_rng(seed)
    n_uid = max(1, round(rows / (n * 12.5)))
    traj = np.sort(rng.integers(0, n_uid * n, rows))
    uid_code, traj_code = traj // n, traj % n
    p_uid = rng.uniform(0, 1, n_uid)
    team = (rng.uniform(0, 1, n_uid * n) < np.repeat(p_uid, n)).astype(np.float64)
    invalid = rng.uniform(0, 1, rows) < 0.1
    scores = (team[traj] - 0.1 * invalid).tolist()
    uid_names = [str(uuid.UUID(bytes=rng.bytes(16), version=4)) for _ in range(n_uid)]
    names = [f"{AGENT_NAMES[i]}" if i < len(AGENT_NAMES) else f"agent{i}" for i in range(agents)]
    agent_code = rng.integers(0, agents, rows)
    return {
        "scores": scores,
        "uid": [uid_names[c] for c in uid_code],
        "traj_uid": traj_code.tolist(),
        "agent": [names[c] for c in agent_code],
    }


def _best_time(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def bench_advantages(rows: int, loop_rows: int, seed: int = 0, n: int = 8, agents: int = 3,
                     repeats: int = 3, methods=("grpo", "drmas")) -> dict:
    """Rows/s of both implementations per method, their ratio and max |difference|."""
    batch = synthetic_batch(rows, seed, n, agents)
    sub = {key: val[:loop_rows] for key, val in batch.items()}
    results = {}
    for method in methods:
        estimator = ESTIMATORS.get(method)
        mean_by, std_by = estimator.mean_by, estimator.std_by
        kw = dict(mean_by=mean_by, std_by=std_by, norm_by_std=True, eps=1e-6)
        vec_s = _best_time(lambda: compute_advantages(**batch, **kw), repeats)
        loop_out = {}
        loop_s = _best_time(lambda: loop_out.update(a=upstream_loop_advantages(**sub, **kw)), 1)
        diff = (compute_advantages(**sub, **kw) - loop_out["a"]).abs().max().item()
        vec_rate, loop_rate = rows / vec_s, len(sub["scores"]) / loop_s
        results[method] = {
            "vectorised_rows_per_s": vec_rate,
            "loop_rows_per_s": loop_rate,
            "ratio": vec_rate / loop_rate,
            "max_abs_diff": diff,
        }
    return {"rows": rows, "loop_rows": len(sub["scores"]), "methods": results}


def main_advantages(rows: int = 1_000_000, seed: int = 0, n: int = 8, agents: int = 3,
                    loop_rows: int = 100_000) -> dict:
    """`drmas perf advantages`: print a report and return the numbers.

    The vectorised version runs on all ``rows`` (conversion from Python lists included);
    the loop, at ~10^4-10^5 rows/s, on the first ``loop_rows`` rows.
    """
    result = bench_advantages(rows, min(loop_rows, rows), seed, n, agents)
    print(f"advantages: {result['rows']:,} rows vectorised, {result['loop_rows']:,} rows loop, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    for method, r in result["methods"].items():
        print(f"  {method:6s} vectorised {r['vectorised_rows_per_s']:>12,.0f} rows/s | "
              f"loop {r['loop_rows_per_s']:>10,.0f} rows/s | ratio {r['ratio']:6.1f}x | "
              f"max |diff| {r['max_abs_diff']:.2e}")
    return result
