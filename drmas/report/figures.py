"""Paper-style figures from run folders, one set per suite:

- `<suite>_grad_norm.png`: per-agent gradient norm before clipping, GRPO vs Dr. MAS;
- `<suite>_team_reward.png`: team reward during RL per method;
- `<suite>_theory_check.png` (+ `.csv`): per agent and step, the GRPO / Dr. MAS squared
  gradient ratio its batch's advantages predict against the same-batch paired measurement,
  with the lemma's factor and upstream's beside them in the table (`theory.py`);
- `<suite>_diagnostics.png`: per agent, its grad norm and its inflation factor on the same
  steps, spikes marked (`stability.spike_mask`).

Curves are means over seeds with a 95% bootstrap band over seeds (seaborn, seeded). Every
title names the suite and the profile; agents and methods keep one colour in every figure
(`style.py`). Each figure has a caption in `drmas/report/captions/<figure>.rst` for the
Snakemake report.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from drmas.config.profile import Config  # noqa: E402
from drmas.config.suites import Suite  # noqa: E402
from drmas.data.io import atomic_path  # noqa: E402
from drmas.report import stability  # noqa: E402
from drmas.report import style  # noqa: E402
from drmas.report.runs import load_runs  # noqa: E402
from drmas.report.style import (METHOD_LABEL, METHOD_ORDER, agent_color,  # noqa: E402
                                agent_palette, method_color, method_palette, title)
from drmas.report.theory import theory_figure, theory_table  # noqa: E402

BAND = {"errorbar": ("ci", 95), "n_boot": 1000, "seed": 0}
BAND_TEXT = "line: mean over seeds, band: 95% bootstrap interval over seeds"
CAPTIONS = Path(__file__).with_name("captions")


def _ordered(present, order) -> list:
    """`present` in the order of `order`, unknown ones after them, sorted."""
    present = set(present)
    return [x for x in order if x in present] + sorted(present - set(order))


def _orders(df: pd.DataFrame, suite: Suite, assignments: list[str]):
    methods = sorted(set(df.method), key=lambda m: (METHOD_ORDER.get(m, 9), m))
    return _ordered(df.agent, suite.agents), methods, _ordered(df.assignment, assignments)


def grad_norm_figure(df: pd.DataFrame, suite: Suite, profile: str, assignments: list[str]):
    agents, methods, rows = _orders(df, suite, assignments)
    data = df.dropna(subset=["grad_norm"])
    data = data.assign(method=data.method.map(lambda m: METHOD_LABEL.get(m, m)))
    g = sns.relplot(data=data, x="step", y="grad_norm", hue="agent", hue_order=agents,
                    palette=agent_palette(agents), col="method",
                    col_order=[METHOD_LABEL.get(m, m) for m in methods], row="assignment",
                    row_order=rows, kind="line", height=2.6, aspect=1.4,
                    facet_kws={"sharey": "row"}, **BAND)
    g.set_axis_labels("RL step", "grad norm before clipping")
    g.set_titles("{row_name} | {col_name}")
    mark_nonfinite(g, df, agents)
    g.figure.suptitle(title(suite, profile, f"per-agent gradient norm\n({BAND_TEXT})"), y=1.08)
    return g.figure


def mark_nonfinite(g, df: pd.DataFrame, agents: list[str]) -> int:
    """A red-edged triangle at the top of a panel at every step where an agent's grad norm,
    reward or loss was NaN or infinite (`runs.nonfinite`): a diverged step is shown, not
    dropped from the line. Returns the number of markers drawn."""
    if "nonfinite" not in df:
        return 0
    bad = df[df.nonfinite.fillna(False).astype(bool)]
    palette, drawn = agent_palette(agents), 0
    for (assignment, label), ax in g.axes_dict.items():
        here = bad[(bad.assignment == assignment)
                   & (bad.method.map(lambda m: METHOD_LABEL.get(m, m)) == label)]
        for agent, hits in here.groupby("agent"):
            steps = sorted(set(hits.step))
            ax.scatter(steps, [0.97] * len(steps), transform=ax.get_xaxis_transform(),
                       marker="v", s=36, color=palette.get(agent, "black"), edgecolor="red",
                       zorder=6, clip_on=False, label=None)
            drawn += len(steps)
    return drawn


def reward_figure(df: pd.DataFrame, suite: Suite, profile: str, assignments: list[str]):
    _, methods, rows = _orders(df, suite, assignments)
    team = df.drop_duplicates(["assignment", "method", "seed", "step"])
    team = team.assign(method=team.method.map(lambda m: METHOD_LABEL.get(m, m)))
    labels = [METHOD_LABEL.get(m, m) for m in methods]
    g = sns.relplot(data=team, x="step", y="team_reward", hue="method", hue_order=labels,
                    palette=method_palette(labels), col="assignment", col_order=rows,
                    kind="line", height=2.8, aspect=1.2, **BAND)
    g.set_axis_labels("RL step", "team reward (train batch mean)")
    g.set_titles("{col_name}")
    g.figure.suptitle(title(suite, profile, f"team reward during RL\n({BAND_TEXT})"), y=1.12)
    return g.figure


def _mean_band(ax, frame: pd.DataFrame, y: str, color: str, label: str, style: str = "-"):
    """Mean over seeds per step and a 95% band over seeds (seaborn, seeded)."""
    sns.lineplot(data=frame, x="step", y=y, color=color, label=label, ax=ax, linestyle=style,
                 legend=False, **BAND)


def diagnostics_figure(df: pd.DataFrame, suite: Suite, profile: str, assignments: list[str],
                       k: float = stability.SPIKE_K):
    """Rows: per assignment, the agents' grad norms (top) and inflation factors (bottom) on
    the same steps; columns: agents; colours: methods; x: steps detected as spikes."""
    agents, methods, rows = _orders(df, suite, assignments)
    fig, axes = plt.subplots(2 * len(rows), len(agents), sharex=True, squeeze=False,
                             figsize=(3.2 * len(agents), 2.0 * 2 * len(rows)))
    for r, assignment in enumerate(rows):
        for c, agent in enumerate(agents):
            top, bottom = axes[2 * r, c], axes[2 * r + 1, c]
            cell = df[(df.assignment == assignment) & (df.agent == agent)]
            for method in methods:
                runs = cell[cell.method == method].sort_values("step")
                color, label = method_color(method), METHOD_LABEL.get(method, method)
                if runs.grad_norm.notna().any():
                    _mean_band(top, runs, "grad_norm", color, label)
                    for _, run in runs.groupby("seed"):
                        hit = stability.spike_mask(run.grad_norm.to_numpy(), k)
                        top.scatter(run.step[hit], run.grad_norm[hit], marker="x", s=30, color=color,
                                    zorder=5)
                if runs.inflation_factor_mean.notna().any():
                    _mean_band(bottom, runs, "inflation_factor_mean", color, label)
            bottom.axhline(1.0, color="grey", lw=0.8, ls=":")
            top.set_title(f"{assignment} | {agent}", fontsize=8, color=agent_color(agent),
                          fontweight="bold")
            top.set_ylabel("grad norm" if c == 0 else "")
            bottom.set_ylabel("inflation factor" if c == 0 else "")
            bottom.set_xlabel("RL step")
    handles = [plt.Line2D([], [], color=method_color(m), label=METHOD_LABEL.get(m, m)) for m in methods]
    handles.append(plt.Line2D([], [], color="black", marker="x", ls="",
                              label=f"spike (> {k:g} × running median)"))
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=len(handles),
               frameon=False, fontsize=8)
    fig.suptitle(title(suite, profile, "grad norm and Lemma 4.2 inflation factor on the same steps\n"
                       f"(inflation: mean over prompt groups of the batch; {BAND_TEXT})"), fontsize=9)
    fig.tight_layout()
    return fig


def render(df: pd.DataFrame, suite: Suite, profile: str, assignments: list[str],
           k: float = stability.SPIKE_K) -> tuple[dict, pd.DataFrame]:
    """{figure name: matplotlib Figure} and the theory-check table (per seed)."""
    sns.set_theme(style="whitegrid", font_scale=0.8)
    theory = theory_table(df)
    figs = {"grad_norm": grad_norm_figure(df, suite, profile, assignments),
            "team_reward": reward_figure(df, suite, profile, assignments),
            "theory_check": theory_figure(theory, suite, profile, assignments),
            "diagnostics": diagnostics_figure(df, suite, profile, assignments, k)}
    return figs, theory


def write_figures(cfg: Config, suite: Suite, run_dirs: list[str], out: str,
                  spike_k: float = stability.SPIKE_K) -> None:
    """`<out>/<suite>_<figure>.png` for every figure of `names.FIGURES`, and the theory check's
    numbers as `<out>/<suite>_theory_check.csv`."""
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    style.use_config(cfg)
    df = load_runs(run_dirs)
    # an infinite norm is no point of a line: it is marked (`mark_nonfinite`) and counted
    # (the stability table's non-finite steps) instead
    df["grad_norm"] = df.grad_norm.where(np.isfinite(df.grad_norm))
    figs, theory = render(df, suite, cfg.profile, cfg.assignments, spike_k)
    for name, fig in figs.items():
        with atomic_path(out_dir / f"{suite.name}_{name}.png") as tmp:
            fig.savefig(tmp, format="png", dpi=120, bbox_inches="tight")
        plt.close(fig)
    with atomic_path(out_dir / f"{suite.name}_theory_check.csv") as tmp:
        theory.to_csv(tmp, index=False, float_format="%.6g")     # squared norms can be tiny


def caption(name: str) -> str:
    """The caption text of figure `name` (captions/<name>.rst)."""
    return (CAPTIONS / f"{name}.rst").read_text()

