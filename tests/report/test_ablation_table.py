"""The ablation table: each method against the method it changes, on hand-made scores and
run folders (tests/runs.py)."""

import dataclasses

import pandas as pd
import pytest

from conftest import make_config, math_suite
from drmas.config.profile import MethodDef
from drmas.report.ablations import DELTA, RUNS, ablation_table, reference_of
from drmas.report.runs import load_runs
from drmas.report.tables import collect, read_scores, write_table
from runs import fake_run, scores_file


def _config(tmp_path):
    cfg = make_config(tmp_path)
    defs = {"grpo_clip0.2": MethodDef(estimator="grpo", label="GRPO, clip 0.2", train={"grad_clip": 0.2}),
            "drmas_nostd": MethodDef(estimator="drmas", label="Dr. MAS, no std", train={"norm_by_std": False})}
    return dataclasses.replace(cfg, methods=["grpo", "drmas", "grpo_clip0.2", "drmas_nostd",
                                             "mean_agent_std_global"], method_defs=defs)


def test_references(tmp_path):
    cfg = _config(tmp_path)
    assert [reference_of(cfg, m) for m in ("base", "grpo", "drmas", "grpo_clip0.2", "drmas_nostd",
                                           "mean_agent_std_global")] == \
        [None, None, "grpo", "grpo", "drmas", "grpo"]


# successes out of 16 on problems p0, p1 of source "a", per (method, seed)
SUCCESSES = {("grpo", 0): [8, 4], ("grpo", 1): [8, 8],
             ("drmas", 0): [12, 4], ("drmas", 1): [8, 12],
             ("grpo_clip0.2", 0): [8, 0], ("grpo_clip0.2", 1): [4, 8],
             ("drmas_nostd", 0): [12, 4], ("drmas_nostd", 1): [8, 12]}


def test_ablation_table_against_hand_values(tmp_path):
    cfg = _config(tmp_path)
    files = [scores_file(tmp_path, "shared", m, s, {"a": c}) for (m, s), c in SUCCESSES.items()]
    files.append(scores_file(tmp_path, "shared", "base", 0, {"a": [1, 1]}))
    runs = [fake_run(tmp_path / "runs", "shared", m, s, {"solver": lambda t, m=m: 10.0 if (t == 6 and m != "drmas") else 1.0,
                                                          "verifier": lambda t, m=m: 9.0 if (t == 7 and m == "grpo") else 1.0},
                     {"solver": 1.0, "verifier": 1.0}) for m, s in SUCCESSES]
    table = ablation_table(cfg, collect(read_scores(files)), load_runs(runs), n_boot=500)
    assert list(table.index) == [("shared", "GRPO"), ("shared", "Dr. MAS"), ("shared", "GRPO, clip 0.2"),
                                 ("shared", "Dr. MAS, no std")]           # trained methods only, profile order
    grpo, drmas, clip, nostd = (table.iloc[i] for i in range(4))
    assert pd.isna(grpo[(DELTA, "avg@16")]) and grpo[("", "reference")] == "(baseline)"
    # Avg avg@16: the mean over seeds and problems, in %
    assert drmas[("Avg", "avg@16")].mean == pytest.approx(100 * (12 + 4 + 8 + 12) / 4 / 16)
    # Δ paired by seed and problem: Dr. MAS - GRPO = (+4, 0, 0, +4) / 16; clip - GRPO = (0, -4, -4, 0) / 16
    assert drmas[("", "reference")] == "GRPO"
    assert drmas[(DELTA, "avg@16")].mean == pytest.approx(100 * 8 / 4 / 16)
    assert clip[(DELTA, "avg@16")].mean == pytest.approx(-100 * 8 / 4 / 16)
    assert clip[(DELTA, "avg@16")].hi <= 0.0                              # every pair is <= 0
    # pass@16: the clip run misses p1 under seed 0 (0 of 16), GRPO solves everything once
    assert clip[(DELTA, "pass@16")].mean == pytest.approx(-100 / 4)
    assert drmas[(DELTA, "pass@16")].mean == 0.0 == drmas[(DELTA, "pass@16")].lo
    # Dr. MAS, no std scores as Dr. MAS: against Dr. MAS, zero
    assert nostd[("", "reference")] == "Dr. MAS" and nostd[(DELTA, "avg@16")].mean == 0.0
    # spikes per run summed over agents: GRPO solver (step 6) + verifier (step 7) = 2; the clip run 1
    spikes = (RUNS, "spikes / run")
    assert [r[spikes].mean for r in (grpo, drmas, clip, nostd)] == [2.0, 0.0, 1.0, 1.0]
    assert grpo[(RUNS, "max / median grad norm")].mean == pytest.approx(10.0)   # the larger agent's
    assert grpo[("", "seeds")] == 2


def test_write_table_writes_the_ablation_table(tmp_path):
    cfg = _config(tmp_path)
    files = [scores_file(tmp_path, "shared", m, s, {"a": c}) for (m, s), c in SUCCESSES.items()]
    runs = [fake_run(tmp_path / "runs", "shared", m, s, {"solver": lambda t: 1.0, "verifier": lambda t: 1.0},
                     {"solver": 1.0, "verifier": 1.0}) for m, s in SUCCESSES]
    write_table(cfg, math_suite(), files, str(tmp_path / "t" / "math"), run_dirs=runs, n_boot=200)
    md = (tmp_path / "t" / "math.md").read_text()
    assert "each method against the method it changes" in md
    assert "| shared | GRPO, clip 0.2 | " in md and "| GRPO | -12.5 [" in md     # signed Δ cell
    csv = pd.read_csv(tmp_path / "t" / "math_ablations.csv")
    assert len(csv) == 4 and csv["Δ vs reference avg@16"].isna().tolist() == [True, False, False, False]
    assert csv["Δ vs reference avg@16"].iloc[1:].round(2).tolist() == [12.5, -12.5, 0.0]
    assert csv["reference"].tolist() == ["(baseline)", "GRPO", "GRPO", "Dr. MAS"]
