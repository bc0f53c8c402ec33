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
from drmas.report.theory import NO_PAIRED, agreement, theory_figure, theory_table
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
            # both methods' batches carry a prediction and, on steps 2 and 4, a paired measurement
            out.append(fake_run(tmp_path, assignment, "grpo", seed,
                                {"solver": lambda s, c=scale: c * (10.0 if s == 6 else 1.0 + 0.01 * s),
                                 "verifier": lambda s: 0.5},
                                {"solver": 3.0 + seed, "verifier": 1.0},
                                predicted={"solver": 2.0 + seed, "verifier": 0.8},
                                paired={"solver": (2.0 + seed) * scale, "verifier": 0.8}))
            out.append(fake_run(tmp_path, assignment, "drmas", seed,
                                {"solver": lambda s, c=scale: c * 1.0, "verifier": lambda s: 0.5},
                                {"solver": 3.0 + seed, "verifier": 1.0},
                                predicted={"solver": 1.5, "verifier": 1.0},
                                paired={"solver": 1.5, "verifier": 2.0}))
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
    grad = _legend(figs["grad_norm"])
    check = _legend(figs["theory_check"])
    for agent in AGENTS:
        assert grad[agent] == check[agent] == mcolors.to_hex(agent_color(agent))
    # one colour per method, in the reward and the diagnostics figures
    reward, diag = _legend(figs["team_reward"]), _legend(figs["diagnostics"])
    for label, method in (("GRPO", "grpo"), ("Dr. MAS", "drmas")):
        assert reward[label] == diag[label] == mcolors.to_hex(method_color(method))
    # clean legends: no semantic names posing as entries
    assert not {"agent", "assignment", "method"} & set(check) and "y = x" in check
    # theory check: log-log, one square view holding every paired point and the diagonal
    ax = figs["theory_check"].axes[0]
    assert ax.get_xscale() == ax.get_yscale() == "log" and ax.get_xlim() == ax.get_ylim()
    paired = theory.dropna(subset=["measured_same_batch"])
    values = np.r_[paired.predicted, paired.measured_same_batch]
    lo, hi = ax.get_xlim()
    assert lo <= values.min() and values.max() <= hi
    assert np.log10(hi / lo) < 1.3 * np.log10(values.max() / values.min())
    assert sum(len(c.get_offsets()) for c in ax.collections) == len(paired) == 32
    # agreement: all agents in the title, per agent below the axes
    assert "all agents: n=32, log10(meas/pred) median" in ax.get_title()
    below = " ".join(t.get_text() for t in figs["theory_check"].texts)
    assert "solver: n=16, log10(meas/pred) median" in below and "verifier: n=16" in below


def test_theory_table_numbers(runs):
    t = theory_table(load_runs(runs))
    assert list(t.columns[:9]) == ["assignment", "agent", "seed", "step", "method", "predicted",
                                   "lemma_factor", "upstream_factor", "measured_same_batch"]
    assert len(t) == 8 * 8 * 2                      # every step of every run, per agent
    t = t.set_index(["assignment", "agent", "seed", "step", "method"])
    row = t.loc[("nonshared", "solver", 1, 2, "grpo")]
    assert (row.predicted, row.lemma_factor, row.upstream_factor) == (3.0, 1.5, 4.0)
    assert row.measured_same_batch == pytest.approx(3.0 * 1.5)      # 0.5 x 4.5 / 0.5
    assert (row.grad_sq_offset, row.paired_rows) == (0.1, 6)
    # Dr. MAS runs' batches count too; steps without a paired measurement give NaN
    assert t.loc[("shared", "verifier", 0, 4, "drmas")].measured_same_batch == pytest.approx(2.0)
    assert np.isnan(t.loc[("shared", "verifier", 0, 3, "drmas")].measured_same_batch)
    stats = agreement(t.reset_index()).set_index("agent")
    # verifier: GRPO batches exactly on the diagonal (8 points), Dr. MAS ones at 2x (8)
    ver = stats.loc["verifier"]
    assert ver.n == 16 and ver.median_log10 == pytest.approx(np.log10(2) / 2)
    assert stats.loc["all"].n == 32


def test_theory_table_adds_grpo_2025_columns_only_when_logged(runs):
    df = load_runs(runs)
    assert "predicted_grpo_2025" not in theory_table(df).columns
    df["predicted_ratio_grpo_2025"] = 1e10
    df["lemma_factor_grpo_2025"] = 2.0
    df["grad_sq_grpo_2025"] = df["grad_sq_drmas"] * 1e9
    t = theory_table(df).set_index(["assignment", "agent", "seed", "step", "method"])
    row = t.loc[("shared", "verifier", 0, 4, "drmas")]
    assert (row.predicted_grpo_2025, row.lemma_factor_grpo_2025) == (1e10, 2.0)
    assert row.measured_same_batch_grpo_2025 == pytest.approx(1e9)
    assert np.isnan(t.loc[("shared", "verifier", 0, 3, "drmas")].measured_same_batch_grpo_2025)


def test_a_batch_whose_drmas_gradient_is_round_off_has_no_measured_ratio(runs):
    """All-equal scores: Dr. MAS's advantages are zero, its squared norm float round-off."""
    df = load_runs(runs)
    step = (df.assignment == "shared") & (df.agent == "verifier") & (df.step == 4) & (df.method == "drmas")
    assert step.sum() >= 1
    df.loc[step, ["grad_sq_grpo", "grad_sq_drmas"]] = [0.0, 2.75e-24]
    t = theory_table(df).set_index(["assignment", "agent", "seed", "step", "method"])
    assert np.isnan(t.loc[("shared", "verifier", 0, 4, "drmas")].measured_same_batch)


def test_a_drmas_gradient_cancelled_to_round_off_relative_to_grpos_has_no_ratio(runs):
    """Rows with the same tokens and opposite Dr. MAS advantages cancel to float round-off,
    which can sit above the absolute floor (1.5e-16 measured); against GRPO's squared norm on
    the same batch (5.9e-3) it is 2.5e-14: no ratio. A real small ratio (1e-6 of GRPO's,
    a norm ratio of 1e-3) keeps its value."""
    df = load_runs(runs)
    at = {s: (df.assignment == "shared") & (df.agent == "verifier") & (df.step == s)
          & (df.method == "drmas") for s in (2, 4)}
    df.loc[at[2], ["grad_sq_grpo", "grad_sq_drmas"]] = [5.868e-3, 1.4943e-16]
    df.loc[at[4], ["grad_sq_grpo", "grad_sq_drmas"]] = [5.868e-3, 5.868e-9]
    t = theory_table(df).set_index(["assignment", "agent", "seed", "step", "method"])
    assert np.isnan(t.loc[("shared", "verifier", 0, 2, "drmas")].measured_same_batch)
    assert t.loc[("shared", "verifier", 0, 4, "drmas")].measured_same_batch == pytest.approx(1e6)


def test_theory_without_paired_measurement(tmp_path):
    """Runs without the `paired` key (and older ones without predicted_ratio): the table keeps
    the factors, measured is NaN, and the figure says there is nothing to compare."""
    runs = [fake_run(tmp_path, "shared", m, 0, {a: (lambda s: 1.0) for a in AGENTS},
                     {"solver": 2.0, "verifier": 1.0}, steps=3,
                     predicted={"solver": 1.2} if m == "grpo" else None) for m in ("grpo", "drmas")]
    df = load_runs(runs)
    assert df.grad_sq_grpo.isna().all() and df.paired_rows.isna().all()
    t = theory_table(df)
    assert len(t) == 2 * 3 * 2 and t.measured_same_batch.isna().all()
    solver = t[(t.method == "grpo") & (t.agent == "solver")]
    assert (solver.predicted == 1.2).all() and (solver.upstream_factor == 2.0).all()
    assert t[t.method == "drmas"].predicted.isna().all()
    assert agreement(t).set_index("agent").loc["all"].n == 0
    fig = theory_figure(t, math_suite(), "default", ["shared"])
    ax = fig.axes[0]
    assert any(NO_PAIRED in x.get_text() for x in ax.texts)
    assert "predicted ratio logged on 3 agent-steps" in " ".join(x.get_text() for x in ax.texts)
    assert NO_PAIRED in ax.get_title()
    fig.savefig(tmp_path / "empty.png")


def test_write_figures_files(tmp_path, runs):
    write_figures(make_config(tmp_path), math_suite(), runs, str(tmp_path / "fig"))
    for name in FIGURES:
        assert (tmp_path / "fig" / f"math_{name}.png").stat().st_size > 5_000
    csv = pd.read_csv(tmp_path / "fig" / "math_theory_check.csv")
    assert len(csv) == 128 and csv.measured_same_batch.notna().sum() == 32


def test_cli_defaults_match_the_modules():
    """The CLI leaves spike k and bootstrap replicates to the config, whose defaults are the
    modules' own."""
    from drmas.config.profile import ReportConfig

    p = build_parser()
    args = p.parse_args(["table", "--config", "c", "--suite", "s", "--scores", "x", "--out", "o"])
    assert args.spike_k is None and args.n_boot is None and args.runs is None
    assert ReportConfig().spike_k == stability.SPIKE_K and ReportConfig().n_boot == N_BOOT
    assert p.parse_args(["plot", "--config", "c", "--suite", "s", "--runs", "r", "--out", "o"]).spike_k is None
