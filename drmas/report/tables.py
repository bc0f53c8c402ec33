"""Paper-style result tables: rows = assignment x method (with the warm-started base), columns =
each data_source's avg@n and pass@n, then the average over data_sources.

Scores of several seeds are averaged; the seed count is a column so nobody mistakes one seed
for many.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from drmas.config import Config, Suite

METHOD_ORDER = {"base": 0, "grpo": 1, "mean_agent_std_global": 2, "mean_global_std_agent": 3,
                "drmas": 4}
METHOD_LABEL = {"base": "Base (warm start)", "grpo": "GRPO", "drmas": "Dr. MAS",
                "mean_agent_std_global": "Abl. agent mean / global std",
                "mean_global_std_agent": "Abl. global mean / agent std"}


def collect(score_files: list[str]) -> pd.DataFrame:
    """Long table: one row per (scores.json, data_source, metric)."""
    records = []
    for path in score_files:
        s = json.loads(Path(path).read_text())
        meta, n = s["meta"], s["n"]
        parts = {**s["per_source"], "Avg": s["macro"]}
        for source, values in parts.items():
            for metric in (f"avg@{n}", f"pass@{n}"):
                records.append({**meta, "source": source, "metric": metric,
                                "value": 100.0 * values[metric]})
    return pd.DataFrame(records)


def _paper_rows(wide: pd.DataFrame, assignments: list[str]) -> pd.DataFrame:
    """Rows in config order of assignments and paper order of methods, methods labelled."""
    order = sorted(wide.index, key=lambda i: (assignments.index(i[0]) if i[0] in assignments else 99,
                                              METHOD_ORDER.get(i[1], 9)))
    wide = wide.loc[order]
    wide.index = pd.MultiIndex.from_tuples([(a, METHOD_LABEL.get(m, m)) for a, m in wide.index],
                                           names=["assignment", "method"])
    return wide


def build_table(long: pd.DataFrame, assignments: list[str]) -> pd.DataFrame:
    """Wide table, seeds averaged, rows in config order, methods in paper order."""
    seeds = long.groupby(["assignment", "method"])["seed"].nunique().rename("seeds")
    wide = long.pivot_table(index=["assignment", "method"], columns=["source", "metric"],
                            values="value", aggfunc="mean")
    sources = [s for s in dict.fromkeys(long["source"]) if s != "Avg"] + ["Avg"]
    wide = wide.reindex(columns=pd.MultiIndex.from_product(
        [sources, sorted(set(long["metric"]), key=lambda m: m.startswith("pass"))]))
    wide = wide.join(seeds.to_frame().set_axis(pd.MultiIndex.from_tuples([("", "seeds")]), axis=1))
    return _paper_rows(wide, assignments)


def behaviour_stats() -> tuple[dict[str, str], set[str]]:
    """({episode stat: label}, stats shown in %) of every registered MAS (each MAS folder's
    stats.py), in each MAS's own order."""
    from drmas.registry import MAS

    labels, percent = {}, set()
    for name in MAS.names():
        labels.update(MAS.get(name).behaviour_labels)
        percent |= set(MAS.get(name).percent_stats)
    return labels, percent


def behaviour_table(score_files: list[str], assignments: list[str]) -> pd.DataFrame | None:
    """Routing: the MAS's episode stats (`behaviour` in scores.json) per data_source, one row
    per assignment x method, seeds averaged; None when the scores carry none."""
    labels, percent = behaviour_stats()
    records = []
    for path in score_files:
        s = json.loads(Path(path).read_text())
        for source, stats in (s.get("behaviour") or {}).get("per_source", {}).items():
            for key, value in stats.items():
                records.append({**s["meta"], "source": source, "stat": key,
                                "value": 100.0 * value if key in percent else value})
    if not records:
        return None
    long = pd.DataFrame(records)
    wide = long.pivot_table(index=["assignment", "method"], columns=["stat", "source"],
                            values="value", aggfunc="mean")
    known = list(labels)                        # stats in the order of their labels
    wide = wide[sorted(wide.columns, key=lambda c: (known.index(c[0]) if c[0] in known
                                                    else len(known), c))]
    return _paper_rows(wide, assignments)


def _flat(columns) -> list[str]:
    """One name per two-level column ("kb-multi avg@16"), for Markdown, CSV and LaTeX."""
    return [f"{a} {b}".strip() for a, b in columns]


def to_markdown(wide: pd.DataFrame, title: str) -> str:
    cols = _flat(wide.columns)
    lines = [f"### {title}", "", "| assignment | method | " + " | ".join(cols) + " |",
             "|---|---|" + "---:|" * len(cols)]
    for (assignment, method), row in wide.iterrows():
        cells = [f"{v:.0f}" if c[1] == "seeds" else f"{v:.1f}" for c, v in zip(wide.columns, row)]
        lines.append(f"| {assignment} | {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_table(cfg: Config, suite: Suite, score_files: list[str], out: str) -> pd.DataFrame:
    wide = build_table(collect(score_files), cfg.assignments)
    out_path = Path(out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    title = (f"{suite.title or suite.name}: avg@n / pass@n (%), profile {cfg.profile}, "
             f"seeds {', '.join(map(str, cfg.seeds))}")
    md = to_markdown(wide, title)
    routing = behaviour_table(score_files, cfg.assignments)
    if routing is not None:
        routing.columns = pd.MultiIndex.from_tuples(
            [(source, behaviour_stats()[0].get(stat, stat)) for stat, source in routing.columns])
        md += "\n" + to_markdown(routing, f"{suite.title or suite.name}: behaviour on the test "
                                  "problems (mean per episode, all samples)")
        routing.set_axis(_flat(routing.columns), axis=1).to_csv(
            out_path.with_name(out_path.name + "_behaviour.csv"), float_format="%.3f")
    out_path.with_suffix(".md").write_text(md)
    flat = wide.set_axis(_flat(wide.columns), axis=1)
    flat.to_csv(out_path.with_suffix(".csv"), float_format="%.2f")
    out_path.with_suffix(".tex").write_text(flat.to_latex(float_format="%.1f", caption=title,
                                                          label=f"tab:{suite.name}"))
    return wide
