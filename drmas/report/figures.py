"""Paper-style figures from run folders: per-agent gradient norms (GRPO vs Dr. MAS side by
side), team reward curves, and the theory check (measured GRPO / Dr. MAS grad-norm ratio
against the predicted (sigma_k^2 + (mu_k - mu)^2) / sigma^2 factor)."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
import yaml  # noqa: E402

from drmas.config import Config, Suite  # noqa: E402
from drmas.report.tables import METHOD_LABEL  # noqa: E402


def load_runs(run_dirs: list[str]) -> pd.DataFrame:
    """Long table: one row per (run, step, agent)."""
    records = []
    for run in run_dirs:
        meta = yaml.safe_load((Path(run) / "config.yaml").read_text())
        for line in (Path(run) / "metrics.jsonl").read_text().splitlines():
            m = json.loads(line)
            for agent, a in m["agents"].items():
                th = m["theory"]["agents"].get(agent, {})
                records.append({
                    "assignment": meta["assignment"], "method": METHOD_LABEL.get(meta["method"], meta["method"]),
                    "seed": meta["seed"], "step": m["step"], "agent": agent,
                    "grad_norm": a["grad_norm"], "team_reward": m["team_reward"]["mean"],
                    "agent_reward": a["reward"]["mean"], "factor": th.get("factor", np.nan)})
    return pd.DataFrame(records)


def grad_norm_figure(df: pd.DataFrame, path: Path) -> None:
    g = sns.relplot(data=df, x="step", y="grad_norm", hue="agent", col="method", row="assignment",
                    kind="line", height=2.6, aspect=1.4, facet_kws={"sharey": "row"})
    g.set_axis_labels("RL step", "grad norm before clipping")
    g.set_titles("{row_name} | {col_name}")
    g.figure.suptitle("Per-agent gradient norm: GRPO vs Dr. MAS", y=1.02)
    g.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(g.figure)


def reward_figure(df: pd.DataFrame, path: Path) -> None:
    team = df.drop_duplicates(["assignment", "method", "seed", "step"])
    g = sns.relplot(data=team, x="step", y="team_reward", hue="method", col="assignment",
                    kind="line", height=2.8, aspect=1.2)
    g.set_axis_labels("RL step", "team reward (train batch mean)")
    g.set_titles("{col_name}")
    g.figure.suptitle("Team reward during RL", y=1.03)
    g.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(g.figure)


def theory_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per (assignment, agent, seed): mean GRPO / Dr. MAS grad-norm ratio vs predicted factor."""
    key = ["assignment", "agent", "seed"]
    grpo = df[df.method == METHOD_LABEL["grpo"]].groupby(key).agg(
        grpo_norm=("grad_norm", "mean"), predicted=("factor", "mean"))
    drmas = df[df.method == METHOD_LABEL["drmas"]].groupby(key).agg(drmas_norm=("grad_norm", "mean"))
    both = grpo.join(drmas, how="inner").reset_index()
    both["measured_ratio"] = both.grpo_norm / both.drmas_norm
    return both


def theory_figure(df: pd.DataFrame, path: Path) -> pd.DataFrame:
    both = theory_table(df)
    fig, ax = plt.subplots(figsize=(4.4, 4))
    if len(both):
        sns.scatterplot(data=both, x="predicted", y="measured_ratio", hue="agent",
                        style="assignment", s=80, ax=ax)
        hi = float(np.nanmax(both[["predicted", "measured_ratio"]].to_numpy())) * 1.1
        ax.plot([0, hi], [0, hi], ls="--", c="grey", lw=1, label="y = x")
        ax.legend(fontsize=7)
    ax.set_xlabel("predicted factor (σ_k² + (μ_k − μ)²) / σ²")
    ax.set_ylabel("measured grad-norm ratio GRPO / Dr. MAS")
    ax.set_title("Theory check: global-baseline gradient inflation")
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return both


def write_figures(cfg: Config, suite: Suite, run_dirs: list[str], out: str) -> None:
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    df = load_runs(run_dirs)
    sns.set_theme(style="whitegrid", font_scale=0.8)
    grad_norm_figure(df.dropna(subset=["grad_norm"]), out_dir / f"{suite.name}_grad_norm.png")
    reward_figure(df, out_dir / f"{suite.name}_team_reward.png")
    both = theory_figure(df, out_dir / f"{suite.name}_theory_check.png")
    both.to_csv(out_dir / f"{suite.name}_theory_check.csv", index=False, float_format="%.4f")
