"""Hand-made evaluation scores and training-run folders, written as drmas writes them, for
the tests of the commands that read them (tables, figures, ablations, the CLI)."""

import json
from pathlib import Path

import numpy as np

AGENTS = ("solver", "verifier")          # the agents of every fake run


def scores_file(tmp_path, assignment, method, seed, per_problem, same_as=None):
    """scores.json as `evaluate` writes it, from {source: [successes of each problem]} (n = 16)."""
    n = 16
    per_source = {s: {f"avg@{n}": float(np.mean(c)) / n, f"pass@{n}": float(np.mean([x > 0 for x in c]))}
                  for s, c in per_problem.items()}
    macro = {k: float(np.mean([v[k] for v in per_source.values()])) for k in (f"avg@{n}", f"pass@{n}")}
    meta = {"suite": "math", "assignment": assignment, "method": method, "seed": seed}
    if same_as:
        meta["same_as"] = same_as
    path = tmp_path / f"{assignment}_{method}_{seed}.json"
    path.write_text(json.dumps({
        "n": n, "meta": meta, "per_source": per_source, "macro": macro, "overall": macro,
        "per_problem": {s: {f"p{i}": [n, c] for i, c in enumerate(cs)} for s, cs in per_problem.items()}}))
    return str(path)


def fake_run(root, assignment, method, seed, norms, factors, steps=8, predicted=None,
             paired=None, paired_steps=(2, 4)):
    """A run folder: metrics.jsonl as the trainer writes it (per-agent grad norm, clip
    fraction, approx KL, adv_diag) and config.yaml with the worker groups.

    `predicted` ({agent: value}) adds `predicted_ratio` and `lemma_factor` (half of it) to
    adv_diag; `paired` ({agent: measured ratio}) adds, on `paired_steps`, the paired
    measurement `paired/<agent>` with grad_sq_drmas 0.5, grad_sq_grpo 0.5 x the ratio,
    grad_sq_offset 0.1, 6 rows."""
    run = root / assignment / method / f"seed{seed}"
    run.mkdir(parents=True)
    groups = {"small": {"model": "small", "agents": list(AGENTS)}}
    (run / "config.yaml").write_text(json.dumps({"suite": "math", "assignment": assignment,
                                                 "method": method, "seed": seed, "groups": groups}))
    with open(run / "metrics.jsonl", "w") as f:
        for step in range(1, steps + 1):
            agents = {a: {"grad_norm": norms[a](step), "reward": {"mean": 0.5}, "clip_frac": 0.01 * i,
                          "approx_kl": 0.001} for i, a in enumerate(AGENTS)}
            diag = {a: {"inflation_factor_mean": factors[a], "inflation_factor_p95": factors[a] * 2,
                        "inflation_factor_max": factors[a] * 3, "num_groups": 4} for a in AGENTS}
            for a in predicted or {}:
                diag[a].update(predicted_ratio=predicted[a], lemma_factor=predicted[a] / 2)
            extra = {}
            if paired and step in paired_steps:
                extra["paired"] = {a: {"grad_sq_grpo": 0.5 * r, "grad_sq_drmas": 0.5,
                                       "grad_sq_offset": 0.1, "rows": 6} for a, r in paired.items()}
            f.write(json.dumps({"step": step, "team_reward": {"mean": 0.1 * step + 0.01 * seed},
                                "agents": agents, "adv_diag": diag, **extra,
                                "groups": {"small": {"skipped_steps": int(step == 3)}},
                                # step 1 pays a one-off cost; seed 1 runs twice as slow
                                "time": {"generate": (5.0 if step == 1 else 1.0) * (1 + seed),
                                         "update": 0.5, "sync": 0.01, "total": 2.0 * (1 + seed)},
                                "tokens_per_s": 100.0 * step,
                                "memory": {"small": {"peak_rss_mb": 100.0 + step},
                                           "big": {"peak_rss_mb": 300.0}}}) + "\n")
    return str(run)


def good_scores(path: Path, n=4) -> Path:
    """A minimal valid scores.json of one math run (avg@n 0.5, pass@n 0.75 on one source), for
    the commands that read scores (`drmas table`) in the CLI and atomic-write tests."""
    path.parent.mkdir(parents=True, exist_ok=True)
    values = {f"avg@{n}": 0.5, f"pass@{n}": 0.75}
    path.write_text(json.dumps({"meta": {"suite": "math", "assignment": "shared", "method": "grpo",
                                         "seed": 0},
                                "n": n, "per_source": {"arith-1": values}, "macro": values}))
    return path
