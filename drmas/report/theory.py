"""The theory check: does GRPO inflate an agent's gradient as much as Lemma 4.2 predicts?

Prediction: under GRPO's global baseline agent k's advantages have second moment
(sigma_k^2 + (mu_k - mu)^2) / sigma^2, the inflation factor (`adv_diag/<agent>/
inflation_factor_mean` in metrics.jsonl, a mean over the batch's prompt groups), while under
Dr. MAS it is 1. The factor multiplies the *squared* gradient scale, so the measurement it
is compared with is the squared ratio of the agent's mean gradient norm under GRPO to its
mean under Dr. MAS, both runs of the same seed. Points on the diagonal confirm the
prediction; points below it show less inflation than predicted.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import matplotlib.pyplot as plt

from drmas.report.style import ASSIGNMENT_MARKERS, agent_color, title

MARGIN = 0.08          # axis padding on each side, as a share of the data's range


def theory_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per (assignment, agent, seed): predicted factor (mean over the GRPO run's steps), mean
    grad norms of the GRPO and the Dr. MAS run, their ratio and its square."""
    key = ["assignment", "agent", "seed"]
    grpo = df[df.method == "grpo"].groupby(key).agg(grpo_norm=("grad_norm", "mean"),
                                                   predicted=("inflation_factor_mean", "mean"))
    drmas = df[df.method == "drmas"].groupby(key).agg(drmas_norm=("grad_norm", "mean"))
    both = grpo.join(drmas, how="inner").reset_index()
    both["measured_ratio"] = both.grpo_norm / both.drmas_norm
    both["measured_sq"] = both.measured_ratio ** 2
    return both


def fitted_limits(values, margin: float = MARGIN) -> tuple[float, float]:
    """Axis limits around `values` with `margin` of their range on each side (a point alone
    gets +-5% of its size, at least 0.05)."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if not len(v):
        return 0.0, 1.0
    lo, hi = float(v.min()), float(v.max())
    pad = margin * (hi - lo) if hi > lo else max(0.05 * abs(hi), 0.05)
    return lo - pad, hi + pad


def _overlapping(xy: np.ndarray, span: np.ndarray, tol: float = 0.04) -> list[list[int]]:
    """Clusters of points closer than `tol` of the axes in both directions."""
    scaled = xy / np.where(span > 0, span, 1.0)
    clusters, seen = [], set()
    for i in range(len(xy)):
        if i in seen:
            continue
        group = [j for j in range(len(xy)) if j not in seen
                 and np.all(np.abs(scaled[j] - scaled[i]) < tol)]
        seen.update(group)
        clusters.append(group)
    return clusters


def theory_figure(both: pd.DataFrame, suite, profile: str, assignments: list[str]):
    """Seed means per (assignment, agent), bars spanning the seeds; overlapping points are
    labelled with leader lines fanned around them."""
    fig, ax = plt.subplots(figsize=(5.6, 4.6))
    points = (both.groupby(["assignment", "agent"], sort=False)
              .agg(x=("predicted", "mean"), y=("measured_sq", "mean"), x_lo=("predicted", "min"),
                   x_hi=("predicted", "max"), y_lo=("measured_sq", "min"), y_hi=("measured_sq", "max"),
                   seeds=("seed", "nunique")).reset_index()
              .dropna(subset=["x", "y"]))
    present = set(points.assignment)
    order = [a for a in assignments if a in present] + sorted(present - set(assignments))
    marker = {a: ASSIGNMENT_MARKERS[i % len(ASSIGNMENT_MARKERS)] for i, a in enumerate(order)}
    for p in points.itertuples():
        ax.errorbar(p.x, p.y, xerr=[[p.x - p.x_lo], [p.x_hi - p.x]],
                    yerr=[[p.y - p.y_lo], [p.y_hi - p.y]], fmt=marker[p.assignment],
                    color=agent_color(p.agent), ms=7, capsize=2, lw=0.8, mec="black", mew=0.5)
    xlim = fitted_limits(np.r_[points.x_lo, points.x_hi])
    ylim = fitted_limits(np.r_[points.y_lo, points.y_hi])
    lo, hi = min(xlim[0], ylim[0]), max(xlim[1], ylim[1])
    ax.plot([lo, hi], [lo, hi], ls="--", c="grey", lw=1)
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    xy = points[["x", "y"]].to_numpy()
    span = np.array([xlim[1] - xlim[0], ylim[1] - ylim[0]])
    for group in _overlapping(xy, span):
        if len(group) < 2:
            continue
        for n, i in enumerate(group):
            angle = 2 * np.pi * n / len(group) + np.pi / 4
            p = points.iloc[i]
            ax.annotate(f"{p.agent} / {p.assignment}", (p.x, p.y), fontsize=6, ha="center",
                        va="center", xytext=(28 * np.cos(angle), 28 * np.sin(angle)),
                        textcoords="offset points",
                        arrowprops={"arrowstyle": "-", "lw": 0.5, "color": "grey"})
    agents = list(dict.fromkeys(points.agent))
    dot = {"ls": "", "marker": "o"}
    by_agent = ax.legend(handles=[plt.Line2D([], [], color=agent_color(a), label=a, **dot)
                                  for a in agents], title="agent", fontsize=7, title_fontsize=7,
                         loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.add_artist(by_agent)
    shapes = [plt.Line2D([], [], ls="", marker=marker[a], color="grey", label=a) for a in order]
    ax.legend(handles=shapes + [plt.Line2D([], [], ls="--", color="grey", label="y = x (theory)")],
              title="assignment", fontsize=7, title_fontsize=7, loc="upper left",
              bbox_to_anchor=(1.01, 0.55))
    ax.set_xlabel("predicted inflation (σ_k² + (μ_k − μ)²) / σ², GRPO runs")
    ax.set_ylabel("measured (grad norm GRPO / Dr. MAS)²")
    seeds = int(points.seeds.max()) if len(points) else 0
    ax.set_title(title(suite, profile, "theory check,\npredicted vs measured GRPO gradient inflation"),
                 fontsize=9, pad=24)
    fig.text(0.01, -0.02, "Points on the dashed diagonal confirm the lemma's prediction; points "
             "below it\nshow less inflation than predicted, above it more. One point per agent and "
             f"assignment:\nmean over {seeds} seed(s), bars span the seeds. Axes fitted to the points "
             "(x and y scales differ).", fontsize=7, va="top")
    return fig
