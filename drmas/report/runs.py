"""Run folders (`metrics.jsonl` + `config.yaml`) as one long table for tables and figures.

One row per (run, step, agent): the agent's gradient norm before clipping, clip fraction
and approximate KL (its own when the run logged them per agent, else its worker group's),
its group's skipped optimiser steps, the team reward, the Lemma 4.2 diagnostics of the
step's batch (`adv_diag`: upstream's, and the same-batch prediction `predicted_ratio`,
`lemma_factor`; runs written before those were logged carry the older
`theory.agents.<agent>.factor`, read as the inflation factor's mean), and on the steps that
measured it the paired same-batch gradient measurement (`paired`: `grad_sq_grpo`,
`grad_sq_drmas`, `grad_sq_offset`, its `rows` as `paired_rows`; NaN on the other steps), and
the agent's largest |advantage| (`adv_absmax`); a profile that runs `grpo_2025` adds its
paired set and same-batch prediction (`*_grpo_2025`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from drmas.errors import DataError

COLUMNS = ["suite", "assignment", "method", "seed", "step", "agent", "grad_norm", "clip_frac",
           "approx_kl", "skipped_steps", "team_reward", "agent_reward", "inflation_factor_mean",
           "inflation_factor_p95", "inflation_factor_max", "mean_gap_mean", "var_ratio_mean",
           "predicted_ratio", "lemma_factor", "grpo_adv_sq", "drmas_adv_sq",
           "grad_sq_grpo", "grad_sq_drmas", "grad_sq_offset", "paired_rows", "nonfinite",
           "adv_absmax", "grad_sq_grpo_2025", "predicted_ratio_grpo_2025", "lemma_factor_grpo_2025"]
DIAG_COLUMNS = COLUMNS[12:COLUMNS.index("grad_sq_grpo")]      # read from adv_diag/<agent>
#: where a NaN or infinity is a divergence of the run, counted per (step, agent) in
#: `nonfinite` (the stability table's "non-finite steps"), never dropped: the agent's grad
#: norm and reward, its worker group's loss, the team reward
NONFINITE_SOURCES = ("grad_norm", "agent_reward", "group_loss", "team_reward")
PAIRED_COLUMNS = {"grad_sq_grpo": "grad_sq_grpo", "grad_sq_drmas": "grad_sq_drmas",
                  "grad_sq_offset": "grad_sq_offset", "paired_rows": "rows"}   # from paired/<agent>


def _num(value) -> float:
    """A logged number as a float: NaN and infinities as they are (a writer other than
    Python's json may spell them "NaN", "Infinity"); NaN when nothing numeric was logged."""
    if isinstance(value, str) and value.strip().lower().lstrip("+-") in _NONFINITE_WORDS:
        return float(value.strip().lower().replace("infinity", "inf"))
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else np.nan


_NONFINITE_WORDS = ("nan", "inf", "infinity")


def nonfinite(value) -> bool:
    """Whether a logged value is there and is no finite number: NaN, an infinity, or text
    that names no number (a diverged step, which the tables count, not drop)."""
    if value is None:
        return False
    return not np.isfinite(_num(value)) if is_number(value) else True


def is_number(value) -> bool:
    """A logged number: an int or float (NaN and infinities included), or their names."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)) or (
        isinstance(value, str) and value.strip().lower().lstrip("+-") in _NONFINITE_WORDS)


def _agent_group(meta: dict) -> dict[str, str]:
    return {a: g for g, spec in (meta.get("groups") or {}).items() for a in spec.get("agents", [])}


def _diag(m: dict, agent: str) -> dict:
    if "adv_diag" in m:
        return m["adv_diag"].get(agent, {})
    old = ((m.get("theory") or {}).get("agents") or {}).get(agent, {})
    return {"inflation_factor_mean": old["factor"]} if "factor" in old else {}


def read_run(run: str | Path) -> list[dict]:
    from drmas.data.io import read_jsonl, read_yaml

    run = Path(run)
    for name in ("config.yaml", "metrics.jsonl"):
        if not (run / name).exists():
            raise DataError(f"run folder {run} lacks {name}")
    meta = read_yaml(run / "config.yaml", what="run config (written by `drmas train`)")
    group_of = _agent_group(meta)
    records = []
    for m in read_jsonl(run / "metrics.jsonl"):       # bounded, regular files only
        for agent, a in m["agents"].items():
            g = (m.get("groups") or {}).get(group_of.get(agent), {})
            diag = _diag(m, agent)
            paired = (m.get("paired") or {}).get(agent) or {}
            logged = {"grad_norm": a.get("grad_norm"),
                      "agent_reward": (a.get("reward") or {}).get("mean"),
                      "group_loss": g.get("loss"), "team_reward": m["team_reward"].get("mean")}
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
                **{k: _num(paired.get(key)) for k, key in PAIRED_COLUMNS.items()},
                "nonfinite": any(nonfinite(logged[k]) for k in NONFINITE_SOURCES),
                "adv_absmax": _num((a.get("advantage") or {}).get("absmax")),
                "grad_sq_grpo_2025": _num(paired.get("grad_sq_grpo_2025")),
                **{k: _num(diag.get(k)) for k in ("predicted_ratio_grpo_2025",
                                                  "lemma_factor_grpo_2025")}})
    return records


def load_runs(run_dirs) -> pd.DataFrame:
    """Long table: one row per (run, step, agent), columns `COLUMNS`."""
    records = [r for run in run_dirs for r in read_run(run)]
    return pd.DataFrame(records, columns=COLUMNS)
