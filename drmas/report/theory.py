"""The theory check: does the ratio of an agent's squared gradient norms, GRPO over Dr. MAS,
follow what its advantages predict, batch by batch?

Prediction (`adv_diag/<agent>/predicted_ratio`, `drmas.algos.advantages.lemma_prediction`):
sum over the agent's rows of A_grpo^2 over the sum of A_drmas^2, the advantages each
estimator trains on, on the step's batch; it is the ratio of squared gradient norms when the
rows' score-function gradients are orthogonal with equal norms. Measurement (`paired/<agent>`,
logged on some steps): the squared norms of the policy-gradient-only gradient at ratio 1 on
the same rows and weights, once with GRPO's advantages and once with Dr. MAS's;
`measured_same_batch` is their ratio. Both come from the same batch, of a GRPO run or of a
Dr. MAS run alike, so the comparison is free of the run-to-run differences (other rollouts,
other policies) that a GRPO run against a Dr. MAS run carries; that two-run comparison is
not made here.

Beside them, per step: `lemma_factor`, Lemma 4.2's (sigma_k^2 + (mu_k - mu)^2) / sigma^2 from
what GRPO normalises (trajectory means), and `upstream_factor`, the paper code's
`inflation_factor_mean`, which mixes rows' own scores with trajectory means and with per-row
format penalties reads >> 1 where GRPO's advantages have second moment <= 1. Runs of a
profile with `grpo_2025` add its prediction, lemma factor and same-batch ratio over Dr. MAS
(`*_grpo_2025` columns).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import matplotlib.pyplot as plt
from matplotlib import ticker

from drmas.report.style import ASSIGNMENT_MARKERS, METHOD_LABEL, agent_color, title

KEY = ["assignment", "agent", "seed", "step", "method"]
#: table column: long-table column of `runs.load_runs`
VALUES = {"predicted": "predicted_ratio", "lemma_factor": "lemma_factor",
          "upstream_factor": "inflation_factor_mean"}
PAIRED = ["grad_sq_grpo", "grad_sq_drmas", "grad_sq_offset", "paired_rows"]
COLUMNS = KEY + list(VALUES) + ["measured_same_batch"] + PAIRED
NO_PAIRED = "no paired measurement in these runs"
NO_SIGNAL = "paired measurements, but none with a ratio (equal scores in every pool)"
ROUNDOFF_GRAD_SQ = 1e-16   # below this a squared gradient norm is round-off (float32 sums)
#: below this share of GRPO's squared norm on the same batch, Dr. MAS's is round-off too: rows
#: with the same tokens and opposite advantages cancel to float32's ~1e-7 of their norm
#: (a squared 1e-14), far under a norm ratio of 1e-5 (a squared 1e-10) that any real pool gives
ROUNDOFF_REL_GRAD_SQ = 1e-10
LOG_MARGIN = 0.08      # axis padding on each side, as a share of the log range


def theory_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (assignment, agent, seed, step, method of the run that produced the batch)
    with `predicted` (that step's predicted_ratio), `lemma_factor`, `upstream_factor`
    (inflation_factor_mean), `measured_same_batch` = grad_sq_grpo / grad_sq_drmas where the
    step has a paired measurement (NaN elsewhere) and the paired raw values. Steps with none
    of the four are left out."""
    t = df[KEY + list(VALUES.values()) + PAIRED].rename(
        columns={v: k for k, v in VALUES.items()})
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = t.grad_sq_grpo / t.grad_sq_drmas
    # a batch where Dr. MAS's advantages are (numerically) all zero, or cancel exactly across
    # rows with the same tokens, has no ratio: its squared norm is float round-off (~1e-24
    # for a tiny model; 1e-16 against GRPO's 6e-3 on one search Searcher batch), not a gradient
    floor = np.maximum(ROUNDOFF_GRAD_SQ, ROUNDOFF_REL_GRAD_SQ * t.grad_sq_grpo.fillna(0.0))
    t["measured_same_batch"] = ratio.where(t.grad_sq_drmas > floor)
    columns = list(COLUMNS)
    if df.get("predicted_ratio_grpo_2025", pd.Series(dtype=float)).notna().any():
        # a profile that runs upstream's 2025 GRPO: its prediction and same-batch ratio too
        t["predicted_grpo_2025"] = df["predicted_ratio_grpo_2025"]
        t["lemma_factor_grpo_2025"] = df["lemma_factor_grpo_2025"]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio_2025 = df["grad_sq_grpo_2025"] / t.grad_sq_drmas
        t["measured_same_batch_grpo_2025"] = ratio_2025.where(t.grad_sq_drmas > floor)
        columns += ["predicted_grpo_2025", "lemma_factor_grpo_2025",
                    "measured_same_batch_grpo_2025"]
    t = t[t[list(VALUES) + ["measured_same_batch"]].notna().any(axis=1)]
    return t[columns].sort_values(["assignment", "agent", "seed", "method", "step"]) \
        .reset_index(drop=True)


def _paired_points(table: pd.DataFrame) -> pd.DataFrame:
    """The rows a log-log plot can show: both values finite and > 0."""
    x, y = table.predicted, table.measured_same_batch
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    return table[ok].assign(log_ratio=np.log10(y[ok] / x[ok]))


def agreement(table: pd.DataFrame) -> pd.DataFrame:
    """Per agent and overall (`agent` = "all"): paired points `n`, the median and the
    standard deviation over them of log10(measured / predicted) and the Pearson correlation
    of log10 measured with log10 predicted (NaN under 3 points or without spread)."""
    points = _paired_points(table)
    rows = []
    for agent, p in [*points.groupby("agent", sort=False), ("all", points)]:
        lx, ly = np.log10(p.predicted.to_numpy()), np.log10(p.measured_same_batch.to_numpy())
        r = np.nan
        if len(p) >= 3 and np.std(lx) > 0 and np.std(ly) > 0:
            r = float(np.corrcoef(lx, ly)[0, 1])
        rows.append({"agent": agent, "n": len(p),
                     "median_log10": float(p.log_ratio.median()) if len(p) else np.nan,
                     "sd_log10": float(p.log_ratio.std(ddof=1)) if len(p) > 1 else np.nan,
                     "r_log": r})
    return pd.DataFrame(rows)


def _describe(a) -> str:
    text = f"n={int(a.n)}, log10(meas/pred) median {a.median_log10:+.2f}"
    if np.isfinite(a.sd_log10):
        text += f", sd {a.sd_log10:.2f}"
    if np.isfinite(a.r_log):
        text += f", r {a.r_log:.2f}"
    return text


def log_limits(values, margin: float = LOG_MARGIN) -> tuple[float, float]:
    """Log-axis limits around the positive finite `values`, `margin` of their log range on
    each side (a factor of 1.5 each side when they are one value)."""
    v = np.asarray(values, dtype=np.float64)
    v = np.log10(v[np.isfinite(v) & (v > 0)])
    if not len(v):
        return 0.1, 10.0
    lo, hi = float(v.min()), float(v.max())
    pad = margin * (hi - lo) if hi > lo else np.log10(1.5)
    return 10 ** (lo - pad), 10 ** (hi + pad)


def _log_ticks(axis, lo: float, hi: float) -> None:
    """Plain-number ticks: at 1, 2, 5 of each decade over up to two decades, else at powers
    of 10; no minor labels (they collide)."""
    subs = (1.0, 2.0, 5.0) if np.log10(hi / lo) <= 2 else (1.0,)
    axis.set_major_locator(ticker.LogLocator(subs=subs))
    axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(ticker.NullFormatter())


def theory_figure(table: pd.DataFrame, suite, profile: str, assignments: list[str]):
    """Predicted against measured same-batch ratio, one point per (run, step, agent) with a
    paired measurement, log-log with the diagonal; colour: agent, marker: assignment, filled:
    a GRPO run's batch, hollow: a Dr. MAS run's (or another method's). Agreement overall in
    the title, per agent below the axes; without paired steps the axes say so."""
    fig, ax = plt.subplots(figsize=(5.8, 4.8))
    points = _paired_points(table)
    present = set(points.assignment)
    order = [a for a in assignments if a in present] + sorted(present - set(assignments))
    marker = {a: ASSIGNMENT_MARKERS[i % len(ASSIGNMENT_MARKERS)] for i, a in enumerate(order)}
    for (assignment, agent, method), p in points.groupby(["assignment", "agent", "method"],
                                                         sort=False):
        color = agent_color(agent)
        ax.scatter(p.predicted, p.measured_same_batch, marker=marker[assignment], s=22,
                   color=color if method == "grpo" else "none", edgecolors=color,
                   linewidths=0.9, alpha=0.8, zorder=3)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("predicted Σ A_GRPO² / Σ A_DrMAS² (advantages of the batch)")
    ax.set_ylabel("measured |g_GRPO|² / |g_DrMAS|² (same batch)")
    stats = agreement(table)
    overall = stats.iloc[-1]
    if len(points):
        lo, hi = log_limits(np.r_[points.predicted, points.measured_same_batch])
        ax.plot([lo, hi], [lo, hi], ls="--", c="grey", lw=1, zorder=2)
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_aspect("equal", adjustable="box")
        for axis in (ax.xaxis, ax.yaxis):
            _log_ticks(axis, lo, hi)
        by_agent = stats.set_index("agent")
        agents = list(dict.fromkeys(points.agent))
        handles = [plt.Line2D([], [], ls="", marker="o", color=agent_color(a), label=a)
                   for a in agents]
        leg = ax.legend(handles=handles, title="agent", fontsize=7, title_fontsize=7,
                        loc="upper left", bbox_to_anchor=(1.02, 1.0))
        ax.add_artist(leg)
        shapes = [plt.Line2D([], [], ls="", marker=marker[a], color="grey", label=a) for a in order]
        fills = [plt.Line2D([], [], ls="", marker="o", color="grey", label="batch of a GRPO run"),
                 plt.Line2D([], [], ls="", marker="o", color="grey", markerfacecolor="none",
                            label="batch of a Dr. MAS run")]
        ax.legend(handles=shapes + fills + [plt.Line2D([], [], ls="--", color="grey",
                                                      label="y = x")],
                  title="assignment", fontsize=7, title_fontsize=7, loc="upper left",
                  bbox_to_anchor=(1.02, 0.45))
        what = f"all agents: {_describe(overall)}"
        per_agent = "".join(f"\n{a}: {_describe(by_agent.loc[a])}" for a in agents)
    else:
        logged = table.predicted[np.isfinite(table.predicted)]
        measured = table.grad_sq_drmas.notna().any() if len(table) else False
        note = NO_SIGNAL if measured else NO_PAIRED
        if len(logged):
            note += (f"\n(predicted ratio logged on {len(logged)} agent-steps, "
                     f"{logged.min():.3g}–{logged.max():.3g})")
        ax.text(0.5, 0.5, note, transform=ax.transAxes, ha="center", va="center", fontsize=8)
        ax.set_xlim(0.1, 10)
        ax.set_ylim(0.1, 10)
        what, per_agent = (NO_SIGNAL if measured else NO_PAIRED), ""
    ax.set_title(title(suite, profile, "theory check, predicted vs measured same-batch\n"
                       f"GRPO / Dr. MAS squared gradient ratio; {what}"), fontsize=8, pad=12)
    runs = ", ".join(METHOD_LABEL.get(m, m) for m in dict.fromkeys(table.method)) or "none"
    fig.text(0.01, -0.03, "One point per run, step and agent with a paired measurement (both "
             "gradients on the same rows,\nratio 1); runs read: " + runs + ". On the dashed "
             "diagonal the advantages' second moments\npredict the gradient ratio." + per_agent,
             fontsize=7, va="top")
    return fig
