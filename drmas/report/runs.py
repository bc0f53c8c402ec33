"""Run folders (`metrics.jsonl` + `config.yaml`) as one long table for tables and figures.

One row per (run, step, agent): the agent's gradient norm before clipping, clip fraction
and approximate KL (its own when the run logged them per agent, else its worker group's),
its group's skipped optimiser steps, the team reward, the Lemma 4.2 diagnostics of the
step's batch (`adv_diag`: upstream's, and the same-batch prediction `predicted_ratio`,
`lemma_factor`; runs written before those were logged carry the older
`theory.agents.<agent>.factor`, read as the inflation factor's mean), and on the steps that
measured it the paired same-batch gradient measurement (`paired`: `grad_sq_grpo`,
`grad_sq_drmas`, `grad_sq_offset`, its `rows` as `paired_rows`; NaN on the other steps).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from drmas.errors import DataError

COLUMNS = ["suite", "assignment", "method", "seed", "step", "agent", "grad_norm", "clip_frac",
           "approx_kl", "skipped_steps", "team_reward", "agent_reward", "inflation_factor_mean",
           "inflation_factor_p95", "inflation_factor_max", "mean_gap_mean", "var_ratio_mean",
           "predicted_ratio", "lemma_factor", "grpo_adv_sq", "drmas_adv_sq",
           "grad_sq_grpo", "grad_sq_drmas", "grad_sq_offset", "paired_rows"]
DIAG_COLUMNS = COLUMNS[12:COLUMNS.index("grad_sq_grpo")]      # read from adv_diag/<agent>
PAIRED_COLUMNS = {"grad_sq_grpo": "grad_sq_grpo", "grad_sq_drmas": "grad_sq_drmas",
                  "grad_sq_offset": "grad_sq_offset", "paired_rows": "rows"}   # from paired/<agent>


def _num(value) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else np.nan


def _agent_group(meta: dict) -> dict[str, str]:
    return {a: g for g, spec in (meta.get("groups") or {}).items() for a in spec.get("agents", [])}


def _diag(m: dict, agent: str) -> dict:
    if "adv_diag" in m:
        return m["adv_diag"].get(agent, {})
    old = ((m.get("theory") or {}).get("agents") or {}).get(agent, {})
    return {"inflation_factor_mean": old["factor"]} if "factor" in old else {}


def read_run(run: str | Path) -> list[dict]:
    run = Path(run)
    try:
        meta = yaml.safe_load((run / "config.yaml").read_text())
        lines = (run / "metrics.jsonl").read_text().splitlines()
    except FileNotFoundError as e:
        raise DataError(f"run folder {run} lacks {Path(e.filename).name}") from None
    group_of = _agent_group(meta)
    records = []
    for line in lines:
        m = json.loads(line)
        for agent, a in m["agents"].items():
            g = (m.get("groups") or {}).get(group_of.get(agent), {})
            diag = _diag(m, agent)
            paired = (m.get("paired") or {}).get(agent) or {}
            records.append({
                "suite": meta.get("suite"), "assignment": meta["assignment"],
                "method": meta["method"], "seed": meta["seed"], "step": m["step"], "agent": agent,
                "grad_norm": _num(a.get("grad_norm")),
                "clip_frac": _num(a.get("clip_frac", g.get("clip_frac"))),
                "approx_kl": _num(a.get("approx_kl", g.get("approx_kl"))),
                "skipped_steps": _num(g.get("skipped_steps")),
                "team_reward": _num(m["team_reward"]["mean"]),
                "agent_reward": _num((a.get("reward") or {}).get("mean")),
                **{k: _num(diag.get(k)) for k in DIAG_COLUMNS},
                **{k: _num(paired.get(key)) for k, key in PAIRED_COLUMNS.items()}})
    return records


def load_runs(run_dirs) -> pd.DataFrame:
    """Long table: one row per (run, step, agent), columns `COLUMNS`."""
    records = [r for run in run_dirs for r in read_run(run)]
    return pd.DataFrame(records, columns=COLUMNS)
