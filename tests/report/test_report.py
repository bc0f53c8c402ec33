"""Tables and figures from hand-made scores and a small fixture of run folders."""

import json
from pathlib import Path

import matplotlib.colors as mcolors
import numpy as np
import pandas as pd
import pytest

from conftest import make_config, math_suite
from drmas.cli.main import build_parser
from drmas.report import efficiency, stability
from drmas.report.figures import caption, render, write_figures
from drmas.report.names import FIGURES
from drmas.report.intervals import N_BOOT, Interval
from drmas.report.runs import load_runs
from drmas.report.style import DELTA_LABEL, agent_color, method_color
from drmas.report.tables import write_table
from drmas.report.theory import theory_table
from runs import AGENTS, fake_run, scores_file


def test_table_intervals_delta_and_base_once(tmp_path):
    cfg = make_config(tmp_path)
    files = [scores_file(tmp_path, "nonshared", "drmas", 0, {"a": [8, 16, 0], "b": [4, 4, 4]}),
             scores_file(tmp_path, "nonshared", "drmas", 1, {"a": [16, 16, 0], "b": [4, 8, 0]}),
             scores_file(tmp_path, "nonshared", "grpo", 0, {"a": [8, 8, 0], "b": [4, 4, 4]}),
             scores_file(tmp_path, "nonshared", "grpo", 1, {"a": [8, 16, 0], "b": [0, 4, 0]}),
             scores_file(tmp_path, "shared", "base", 0, {"a": [2, 2, 2], "b": [0, 0, 0]}),
             scores_file(tmp_path, "nonshared", "base", 0, {"a": [2, 2, 2], "b": [0, 0, 0]},
                         same_as="shared")]
    wide = write_table(cfg, math_suite(), files, str(tmp_path / "tables" / "math"), n_boot=500)
    # config order of assignments, paper order of methods, the base row once (nonshared's is a copy)
    assert list(wide.index) == [("shared", "Base (before RL)"), ("nonshared", "GRPO"),
                                ("nonshared", "Dr. MAS"), ("nonshared", DELTA_LABEL)]
    row = wide.loc[("nonshared", "Dr. MAS")]
    a = row[("a", "avg@16")]
    assert isinstance(a, Interval) and a.seeds == 2 and a.problems == 3
    assert a.mean == pytest.approx(100 * (8 + 16 + 0 + 16 + 16 + 0) / 6 / 16)
    assert a.lo < a.mean < a.hi
    assert row[("Avg", "avg@16")].mean == pytest.approx((a.mean + row[("b", "avg@16")].mean) / 2)
    assert row[("", "seeds")] == 2
    # Δ paired by seed and problem: a differs in (seed 0, p1) and (seed 1, p0), by 8/16 each
    delta = wide.loc[("nonshared", DELTA_LABEL), ("a", "avg@16")]
    assert delta.mean == pytest.approx(100 / 6)
    assert delta.lo >= 0.0                     # every paired difference is >= 0
    csv = pd.read_csv(tmp_path / "tables" / "math.csv")
    assert list(csv.columns[2:5]) == ["a avg@16", "a avg@16 lo", "a avg@16 hi"]
    assert csv.columns[-1] == "seeds" and len(csv) == 4
    md = (tmp_path / "tables" / "math.md").read_text()
    assert "profile" in md and "[math]" in md
    assert "| nonshared | Δ Dr. MAS − GRPO | +16.7 [" in md
    assert "nonshared plays the same base models as shared" in md
    assert md.count("Base (before RL)") == 1
    assert "$\\Delta$" in (tmp_path / "tables" / "math.tex").read_text()


def test_table_one_seed_without_per_problem_counts(tmp_path):
    """Older scores.json files (no per_problem): one value per seed and source; one seed
    gives the point alone."""
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"n": 16, "meta": {"assignment": "shared", "method": "grpo", "seed": 0},
                                "per_source": {"a": {"avg@16": 0.5, "pass@16": 1.0}}}))
    wide = write_table(make_config(tmp_path), math_suite(), [str(path)], str(tmp_path / "t"))
    cell = wide.loc[("shared", "GRPO"), ("a", "avg@16")]
    assert (cell.mean, cell.lo, cell.hi) == (50.0, 50.0, 50.0) and cell.cell() == "50.0"


def test_behaviour_table_when_scores_carry_routing(tmp_path):
    cfg = make_config(tmp_path)
    files = []
    for assignment, method, searched, twin in (("shared", "base", 0.5, None), ("nonshared", "base", 0.5, "shared"),
                                               ("shared", "drmas", 0.9, None)):
        path = scores_file(tmp_path, assignment, method, 0, {"a": [8, 8]}, same_as=twin)
        s = json.loads(open(path).read())
        s["behaviour"] = {"overall": {}, "per_source": {"a": {"searched_before_answer": searched,
                                                              "searches": 2 * searched}}}
        open(path, "w").write(json.dumps(s))
        files.append(path)
    write_table(cfg, math_suite(), files, str(tmp_path / "tables" / "search"), n_boot=200)
    md = (tmp_path / "tables" / "search.md").read_text()
    assert "behaviour on the test problems" in md
    assert "| shared | Dr. MAS | 90.0 | 1.8 |" in md and "| shared | Base (before RL) | 50.0 | 1.0 |" in md
    assert "| nonshared | Base" not in md                  # the copy is not repeated
    csv = pd.read_csv(tmp_path / "tables" / "search_behaviour.csv")
    assert list(csv["a searches / episode"]) == [1.0, 1.8]


# --- run folders ------------------------------------------------------------------------
@pytest.fixture
def runs(tmp_path):
    out = []
    for seed in (0, 1):
        for assignment, scale in (("shared", 1.0), ("nonshared", 1.5)):
            # GRPO: the solver's norm spikes at step 6 (10 x the typical 1.0)
            out.append(fake_run(tmp_path, assignment, "grpo", seed,
                                {"solver": lambda s, c=scale: c * (10.0 if s == 6 else 1.0 + 0.01 * s),
                                 "verifier": lambda s: 0.5},
                                {"solver": 3.0 + seed, "verifier": 1.0}))
            out.append(fake_run(tmp_path, assignment, "drmas", seed,
                                {"solver": lambda s, c=scale: c * 1.0, "verifier": lambda s: 0.5},
                                {"solver": 3.0 + seed, "verifier": 1.0}))
    return out


def test_spike_mask_against_hand_series():
    norms = [1.0, 1.2, 0.9, 5.0, 1.1, np.nan, 3.0, 3.5]
    # step 4: 5.0 > 3 x median(1.0, 1.2, 0.9) = 3.0; step 7: 3.0 > 3 x 1.05? no (3.15); step 8: 3.5 > 3.3
    assert stability.spike_mask(norms).tolist() == [False, False, False, True, False, False, False, True]
    assert stability.spike_mask([9.0, 1.0, 1.0]).tolist() == [False] * 3     # too little history


def test_stability_table_from_runs(runs):
    df = load_runs(runs)
    stats = stability.run_stats(df)
    grpo_solver = stats[(stats.method == "grpo") & (stats.agent == "solver")]
    assert grpo_solver.spikes.tolist() == [1, 1, 1, 1]
    assert (stats[stats.method == "drmas"].spikes == 0).all()
    assert grpo_solver.skipped_steps.tolist() == [1.0] * 4     # the group's skipped step
    table = stability.stability_table(df, n_boot=200)
    cell = table.loc[("shared", "grpo"), ("solver", "spikes")]
    assert cell.mean == 1.0 and cell.seeds == 2
    clip = table.loc[("shared", "drmas"), ("verifier", "clip_frac")]
    assert clip.mean == pytest.approx(1.0)                      # 0.01 -> 1 %


def test_table_with_runs_writes_stability(tmp_path, runs):
    files = [scores_file(tmp_path, "shared", m, s, {"a": [8, 4]}) for m in ("grpo", "drmas") for s in (0, 1)]
    write_table(make_config(tmp_path), math_suite(), files, str(tmp_path / "t" / "math"), run_dirs=runs,
                n_boot=200)
    md = (tmp_path / "t" / "math.md").read_text()
    assert "training stability per agent" in md and "3 × the median of the earlier steps" in md
    csv = pd.read_csv(tmp_path / "t" / "math_stability.csv")
    assert {"solver spikes / run", "solver spikes / run lo", "verifier clip fraction (%)"} <= set(csv.columns)
    eff = pd.read_csv(tmp_path / "t" / "math_efficiency.csv")
    assert "time per training step and peak memory" not in md        # machine-dependent: apart
    assert "time per training step" in (tmp_path / "t" / "math_efficiency.md").read_text()
    assert len(eff) == 4 and (eff["total (ms/step)"] == 3000.0).all()   # seeds: 2000 and 4000 ms


def test_efficiency_against_hand_values(runs):
    grpo = [r for r in runs if "/shared/grpo/" in r]
    seed0, seed1 = (efficiency.run_efficiency(r) for r in grpo)
    # medians over 8 steps: generate 1.0 s (step 1's 5.0 s ignored), tokens 450/s
    assert seed0["generate"] == pytest.approx(1000.0) and seed1["generate"] == pytest.approx(2000.0)
    assert seed0["tokens_per_s"] == pytest.approx(450.0)
    assert (seed0["peak_max_mb"], seed0["peak_sum_mb"]) == (300.0, 408.0)   # last step: 108 + 300
    # groups in one process (backend: local) all report that process: it counts once
    groups = {"a": {"peak_rss_mb": 700.0}, "b": {"peak_rss_mb": 690.0}}
    assert sorted(efficiency._peaks(groups)) == [690.0, 700.0]
    assert efficiency._peaks(groups, one_process=True) == [700.0]
    config = json.loads((Path(grpo[0]) / "config.yaml").read_text())
    config["config"] = {"resources": {"backend": "local"}}      # as the trainer writes it
    (Path(grpo[0]) / "config.yaml").write_text(json.dumps(config))
    local = efficiency.run_efficiency(grpo[0])
    assert (local["peak_max_mb"], local["peak_sum_mb"]) == (300.0, 300.0)
    table = efficiency.efficiency_table(runs, n_boot=200, assignments=["shared", "nonshared"])
    cell = table.loc[("shared", "grpo"), ("", "generate (ms/step)")]
    assert (cell.mean, cell.seeds) == (pytest.approx(1500.0), 2) and cell.lo >= 1000.0
    assert table.index.tolist() == [("shared", "grpo"), ("shared", "drmas"),
                                    ("nonshared", "grpo"), ("nonshared", "drmas")]


def _colors(handles_and_labels) -> dict:
    return {label: mcolors.to_hex(h.get_color() if hasattr(h, "get_color") else h.get_facecolor()[0])
            for h, label in handles_and_labels}


def _legend(fig) -> dict:
    """{label: colour} of every legend in the figure (figure-level and per axes)."""
    out = {}
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    for ax in fig.axes:
        legends += [a for a in ax.artists if hasattr(a, "legend_handles")]
    for leg in legends:
        out.update(_colors(zip(leg.legend_handles, [t.get_text() for t in leg.get_texts()])))
    return out


def test_figures_titles_colours_and_theory_axes(tmp_path, runs):
    cfg, suite = make_config(tmp_path), math_suite()
    figs, theory = render(load_runs(runs), suite, cfg.profile, ["shared", "nonshared"])
    assert set(figs) == set(FIGURES)
    for name, fig in figs.items():
        text = (fig._suptitle.get_text() if fig._suptitle else "") + " ".join(ax.get_title() for ax in fig.axes)
        assert suite.name in text and f"profile {cfg.profile}" in text, name
        assert caption(name).strip()
    # one colour per agent, in every figure that shows agents, as the fixed palette says
    grad, check = _legend(figs["grad_norm"]), _legend(figs["theory_check"])
    for agent in AGENTS:
        assert grad[agent] == check[agent] == mcolors.to_hex(agent_color(agent))
    # one colour per method, in the reward and the diagnostics figures
    reward, diag = _legend(figs["team_reward"]), _legend(figs["diagnostics"])
    for label, method in (("GRPO", "grpo"), ("Dr. MAS", "drmas")):
        assert reward[label] == diag[label] == mcolors.to_hex(method_color(method))
    # clean legends: no semantic names posing as entries
    assert not {"agent", "assignment", "method"} & set(check) and "y = x (theory)" in check
    # theory check: axes contain every point, margins under 30 % of each axis
    ax = figs["theory_check"].axes[0]
    pts = theory.groupby(["assignment", "agent"]).agg(x=("predicted", "mean"), y=("measured_sq", "mean"))
    for lim, lo, hi in ((ax.get_xlim(), theory.predicted.min(), theory.predicted.max()),
                        (ax.get_ylim(), theory.measured_sq.min(), theory.measured_sq.max())):
        assert lim[0] <= lo and hi <= lim[1]
        assert (lim[1] - lim[0] - (hi - lo)) / (lim[1] - lim[0]) < 0.30
    assert len(pts) == 4
    # the two verifier points coincide: they are labelled
    labels = [t.get_text() for t in ax.texts]
    assert "verifier / shared" in labels and "verifier / nonshared" in labels


def test_theory_table_numbers(runs):
    both = theory_table(load_runs(runs)).set_index(["assignment", "agent", "seed"])
    row = both.loc[("shared", "solver", 1)]
    grpo = (sum(1.0 + 0.01 * s for s in range(1, 9) if s != 6) + 10.0) / 8
    assert row.grpo_norm == pytest.approx(grpo) and row.drmas_norm == pytest.approx(1.0)
    assert row.measured_sq == pytest.approx(grpo ** 2) and row.predicted == 4.0


def test_write_figures_files(tmp_path, runs):
    write_figures(make_config(tmp_path), math_suite(), runs, str(tmp_path / "fig"))
    for name in FIGURES:
        assert (tmp_path / "fig" / f"math_{name}.png").stat().st_size > 5_000
    assert len(pd.read_csv(tmp_path / "fig" / "math_theory_check.csv")) == 8


def test_cli_defaults_match_the_modules():
    """The CLI leaves spike k and bootstrap replicates to the config, whose defaults are the
    modules' own."""
    from drmas.config.profile import ReportConfig

    p = build_parser()
    args = p.parse_args(["table", "--config", "c", "--suite", "s", "--scores", "x", "--out", "o"])
    assert args.spike_k is None and args.n_boot is None and args.runs is None
    assert ReportConfig().spike_k == stability.SPIKE_K and ReportConfig().n_boot == N_BOOT
    assert p.parse_args(["plot", "--config", "c", "--suite", "s", "--runs", "r", "--out", "o"]).spike_k is None
