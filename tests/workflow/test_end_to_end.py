"""The whole default workflow on a reduced config (tests/workflows.py; slow: `pytest -m slow`)."""

import json
import subprocess

import pandas as pd
import pytest

import streaming
from repo import snakemake_bin, workflow_env
from workflows import reduced_workflow


@pytest.mark.slow
def test_default_workflow_reduced(tmp_path, capsys):
    reduced_workflow(tmp_path)                 # writes config/e2e.yaml
    cmd, env = [snakemake_bin(), "--cores", "2", "--configfile", "config/e2e.yaml"], workflow_env()
    proc = streaming.run(cmd, tmp_path, env, capsys, timeout=2400, label="e2e")
    assert proc.returncode == 0, proc.stderr[-4000:]

    res = tmp_path / "results" / "e2e"
    table = pd.read_csv(res / "tables" / "math.csv")
    # 3 assignments x (grpo, drmas, paired Δ) + one base row per distinct base models
    # (shared and nonshared play the same warm start: one row)
    assert len(table) == 3 * 3 + 2
    assert {"addsub-1 avg@4", "addsub-1 avg@4 lo", "addsub-1 pass@4", "Avg avg@4", "Avg pass@4"} <= set(table.columns)
    scores_rows = table[~table["method"].str.startswith("Δ")]
    assert ((scores_rows["Avg pass@4"] >= scores_rows["Avg avg@4"] - 1e-9)).all()
    assert ((table["Avg avg@4 lo"] <= table["Avg avg@4"] + 1e-9)).all()
    for fig in ("grad_norm", "team_reward", "theory_check", "diagnostics"):
        assert (res / "figures" / f"math_{fig}.png").stat().st_size > 10_000
    run = res / "runs" / "math" / "nonshared" / "drmas" / "seed0"
    lines = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [1, 2, 3]
    assert set(lines[0]["agents"]) == {"solver", "verifier"}
    assert set(lines[0]["groups"]) == {"solver", "verifier"}
    assert (run / "final" / "solver" / "model.safetensors").exists()
    assert json.loads((run / "summary.json").read_text())["backend"] == "ray"
    scores = json.loads((res / "evals" / "math" / "nonshared" / "drmas" / "seed0" / "scores.json").read_text())
    assert scores["n"] == 4 and set(scores["per_source"]) == {"addsub-1", "addsub-2", "mul-addsub"}

    # the search suite: BM25 index, three agents, exact-match table with a behaviour part
    assert any((res / "index" / "search").iterdir())
    table = pd.read_csv(res / "tables" / "search.csv")
    assert len(table) == 11 and {"kb-single avg@4", "kb-multi pass@4"} <= set(table.columns)
    behaviour = pd.read_csv(res / "tables" / "search_behaviour.csv")
    assert (behaviour["kb-multi searches / episode"] >= 0).all() and len(behaviour) == 8
    run = res / "runs" / "search" / "hetero" / "grpo" / "seed0"
    lines = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [1, 2, 3]
    assert set(lines[0]["groups"]) == {"verifier", "searcher", "answerer"}
    assert {"searches", "searched_before_answer", "answered_early"} <= set(lines[0]["episodes"])
    scores = json.loads((res / "evals" / "search" / "hetero" / "grpo" / "seed0" / "scores.json").read_text())
    assert set(scores["behaviour"]["per_source"]) == {"kb-single", "kb-multi"}
    # nonshared plays the same base models as shared: its base evaluation is a copy
    base = {a: json.loads((res / "evals" / "search" / a / "base" / "seed0" / "scores.json").read_text())
            for a in ("shared", "nonshared", "hetero")}
    assert base["nonshared"]["meta"]["same_as"] == "shared" and "same_as" not in base["hetero"]["meta"]
    assert base["nonshared"]["overall"] == base["shared"]["overall"]
    medium_log = (res / "logs" / "warmstart" / "search_medium.log").read_text()
    assert " traces of answerer\n" in medium_log          # it learns its one role only

    again = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0
    assert "Nothing to be done" in again.stdout + again.stderr

    # Snakemake's report: every table and figure marked report(...), with its caption
    report = res / "report.html"
    proc = subprocess.run(cmd[:1] + ["--report", str(report), "--configfile", "config/e2e.yaml"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    html = report.read_text(errors="replace")
    for name in ("math_grad_norm.png", "search_theory_check.png", "math.csv", "search_behaviour.csv"):
        assert name in html, name
