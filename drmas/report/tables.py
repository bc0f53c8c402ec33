"""Paper-style result tables: rows = assignment x method, columns = each data_source's avg@n
and pass@n, then their average over data_sources ("Avg").

Each cell is the mean over seeds and test problems with a 95% bootstrap interval that
resamples both (`intervals.crossed_bootstrap`); per assignment a row "Δ Dr. MAS − GRPO"
gives the difference paired by seed and problem, with its interval. Base (warm-start) rows
appear once per distinct set of base models: an evaluation copied from a twin assignment
(`meta.same_as` in its scores.json) is not repeated. With run folders, the ablation table
(`ablations.py`: each method against the one it changes) and the stability table
(`stability.py`) follow.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from drmas.config.profile import Config
from drmas.config.suites import Suite
from drmas.data.io import atomic_path, atomic_write_text
from drmas.errors import DataError
from drmas.evaluation.metrics import problem_values
from drmas.report import ablations, efficiency, stability
from drmas.report import style
from drmas.report.cells import AVG, interval_cells, metrics_of, paired_cells, sources_of
from drmas.report.intervals import N_BOOT, Interval
from drmas.report.style import DELTA_LABEL, DELTA_LABELS, METHOD_LABEL, METHOD_ORDER, row_order

ALL_PROBLEMS = "(all)"       # stands for the problems of scores.json files without per-problem counts


def read_scores(score_files: list[str]) -> list[dict]:
    from drmas.data.io import read_json

    return [read_json(path, what="scores.json of `drmas evaluate`") for path in score_files]


def base_copies(scores: list[dict]) -> dict[str, list[str]]:
    """{twin assignment: [assignments whose base evaluation is a copy of the twin's]}."""
    copies: dict[str, list[str]] = {}
    for s in scores:
        meta = s["meta"]
        if meta.get("method") == "base" and meta.get("same_as"):
            copies.setdefault(meta["same_as"], [])
            if meta["assignment"] not in copies[meta["same_as"]]:
                copies[meta["same_as"]].append(meta["assignment"])
    return copies


def collect(scores: list[dict]) -> pd.DataFrame:
    """Long table, one row per (scores.json, data_source, metric, problem); values in %.

    Base evaluations copied from a twin are left out (the twin's row stands for them).
    """
    records = []
    for s in scores:
        meta, n = s["meta"], s["n"]
        if meta.get("method") == "base" and meta.get("same_as"):
            continue
        per_problem = s.get("per_problem") or {}
        for source, summary in s["per_source"].items():
            for metric in (f"avg@{n}", f"pass@{n}"):
                values = (problem_values(per_problem[source], n)[metric] if source in per_problem
                          else {ALL_PROBLEMS: summary[metric]})
                records += [{"assignment": meta["assignment"], "method": meta["method"],
                             "seed": meta["seed"], "source": source, "metric": metric,
                             "problem": pid, "value": 100.0 * v} for pid, v in values.items()]
    return pd.DataFrame(records)


def build_table(long: pd.DataFrame, assignments: list[str], n_boot: int = N_BOOT) -> pd.DataFrame:
    """Rows (assignment, method label) in config order and paper order of methods, then the
    paired Δ row per assignment; columns (source, metric) then (Avg, metric) holding
    `Interval`s (in %), and ("", "seeds")."""
    if long.empty:
        raise DataError("no scores to tabulate")
    sources, metrics = sources_of(long), metrics_of(long)
    order = row_order({(a, m) for a, m in zip(long.assignment, long.method)}, assignments)
    rows, index = [], []
    for assignment, method in order:
        frame = long[(long.assignment == assignment) & (long.method == method)]
        rows.append({**interval_cells(frame, sources, metrics, n_boot), ("", "seeds"): frame.seed.nunique()})
        index.append((assignment, METHOD_LABEL.get(method, method)))
        for baseline, label in DELTA_LABELS.items():
            if method != "drmas" or (assignment, baseline) not in order:
                continue
            grpo = long[(long.assignment == assignment) & (long.method == baseline)]
            delta = paired_cells(frame, grpo, sources, metrics, n_boot)
            if delta is not None:
                seeds = len(set(frame.seed) & set(grpo.seed))
                rows.append({**delta, ("", "seeds"): seeds})
                index.append((assignment, label))
    columns = [(s, m) for s in sources + [AVG] for m in metrics] + [("", "seeds")]
    return pd.DataFrame([[row.get(c) for c in columns] for row in rows],
                        index=pd.MultiIndex.from_tuples(index, names=["assignment", "method"]),
                        columns=pd.MultiIndex.from_tuples(columns))


def behaviour_stats() -> tuple[dict[str, str], set[str]]:
    """({episode stat: label}, stats shown in %) of every registered MAS (each MAS folder's
    stats.py), in each MAS's own order."""
    from drmas.registry import MAS

    labels, percent = {}, set()
    for name in MAS.names():
        labels.update(MAS.get(name).behaviour_labels)
        percent |= set(MAS.get(name).percent_stats)
    return labels, percent


def behaviour_table(scores: list[dict], assignments: list[str]) -> pd.DataFrame | None:
    """Routing: the MAS's episode stats (`behaviour` in scores.json) per data_source, one row
    per assignment x method (base once per distinct base models), seeds averaged; None when
    the scores carry none."""
    labels, percent = behaviour_stats()
    records = []
    for s in scores:
        if s["meta"].get("method") == "base" and s["meta"].get("same_as"):
            continue
        for source, stats in (s.get("behaviour") or {}).get("per_source", {}).items():
            for key, value in stats.items():
                records.append({**s["meta"], "source": source, "stat": key,
                                "value": 100.0 * value if key in percent else value})
    if not records:
        return None
    long = pd.DataFrame(records)
    wide = long.pivot_table(index=["assignment", "method"], columns=["stat", "source"],
                            values="value", aggfunc="mean")
    known = list(labels)                        # stats in the MAS's own order
    wide = wide[sorted(wide.columns, key=lambda c: (known.index(c[0]) if c[0] in known
                                                    else len(known), c))]
    order = sorted(wide.index, key=lambda i: (assignments.index(i[0]) if i[0] in assignments
                                              else 99, METHOD_ORDER.get(i[1], 9)))
    wide = wide.loc[order]
    wide.index = pd.MultiIndex.from_tuples([(a, METHOD_LABEL.get(m, m)) for a, m in wide.index],
                                           names=["assignment", "method"])
    wide.columns = pd.MultiIndex.from_tuples(
        [(source, labels.get(stat, stat)) for stat, source in wide.columns])
    return wide


def _flat(columns) -> list[str]:
    """One name per two-level column ("kb-multi avg@16"), for Markdown, CSV and LaTeX."""
    return [f"{a} {b}".strip() for a, b in columns]


def _text(value, signed: bool = False) -> str:
    if isinstance(value, Interval):
        return value.cell(signed=signed)
    if isinstance(value, str):
        return value
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return "" if pd.isna(value) else f"{value:.1f}"


def as_text(wide: pd.DataFrame) -> pd.DataFrame:
    """Cells as strings: 'mean [lo, hi]', signed on Δ rows and under Δ columns."""
    delta_cols = [str(c[0] if isinstance(c, tuple) else c).startswith("Δ") for c in wide.columns]
    return pd.DataFrame([[_text(v, signed=idx[1] in DELTA_LABELS.values() or d)
                          for v, d in zip(row, delta_cols)]
                         for idx, row in zip(wide.index, wide.to_numpy())],
                        index=wide.index, columns=_flat(wide.columns))


def to_markdown(wide: pd.DataFrame, title: str, notes: list[str] = ()) -> str:
    text = as_text(wide)
    lines = [f"### {title}", "", "| assignment | method | " + " | ".join(text.columns) + " |",
             "|---|---|" + "---:|" * len(text.columns)]
    for (assignment, method), row in text.iterrows():
        lines.append(f"| {assignment} | {method} | " + " | ".join(row) + " |")
    return "\n".join(lines + [""] + [f"{n}" for n in notes if n]) + "\n"


def as_numbers(wide: pd.DataFrame) -> pd.DataFrame:
    """Intervals split into three numeric columns: '<col>', '<col> lo', '<col> hi'."""
    out = {}
    for col, name in zip(wide.columns, _flat(wide.columns)):
        values = wide[col]
        if any(isinstance(v, Interval) for v in values):
            out[name] = [v.mean if isinstance(v, Interval) else np.nan for v in values]
            out[f"{name} lo"] = [v.lo if isinstance(v, Interval) else np.nan for v in values]
            out[f"{name} hi"] = [v.hi if isinstance(v, Interval) else np.nan for v in values]
        else:
            out[name] = list(values)
    return pd.DataFrame(out, index=wide.index)


def _base_note(copies: dict[str, list[str]]) -> str:
    if not copies:
        return ""
    same = "; ".join(f"{', '.join(c)} {'plays' if len(c) == 1 else 'play'} the same base "
                     f"models as {twin}" for twin, c in copies.items())
    return (f"Base rows: one per distinct set of base models ({same}: see the {', '.join(copies)} "
            "base row).")


def _base_seeds_note(scores: list[dict], seeds: list[int]) -> str:
    base = sorted({s["meta"]["seed"] for s in scores if s["meta"]["method"] == "base"})
    if not base or base == seeds:
        return ""
    return (f"Base rows: seed {', '.join(map(str, base))} only (the warm-started models do not "
            "depend on the RL seed, so the workflow evaluates them once): their intervals are "
            "over test problems.")


def write_table(cfg: Config, suite: Suite, score_files: list[str], out: str,
                run_dirs: list[str] | None = None, spike_k: float = stability.SPIKE_K,
                n_boot: int = N_BOOT) -> pd.DataFrame:
    """`<out>.md` (all sections), `<out>.csv` and `<out>.tex` (main table), and beside them
    `<out>_behaviour.csv` (when the scores carry routing stats), and when run folders are given
    `<out>_ablations.csv`, `<out>_stability.csv` and `<out>_efficiency.{csv,md}` (the last
    machine-dependent, so kept out of `<out>.md`)."""
    style.use_config(cfg)
    scores = read_scores(score_files)
    long = collect(scores)
    wide = build_table(long, cfg.assignments, n_boot=n_boot)
    out_path = Path(out)        # every file is `<out><ending>`: a dot in the name is kept
    out_path.parent.mkdir(parents=True, exist_ok=True)
    name = suite.title or suite.name
    seeds = sorted({s["meta"]["seed"] for s in scores})
    title = (f"{name} [{suite.name}]: avg@n / pass@n (%), profile {cfg.profile}, "
             f"seeds {', '.join(map(str, seeds))}")
    notes = [f"Cells: mean over seeds and test problems [95% bootstrap interval resampling "
             f"both, {n_boot} replicates]; {DELTA_LABEL}: paired by seed and problem. "
             "An interval that excludes 0 on a Δ row separates the methods at this sample size.",
             _base_note(base_copies(scores)), _base_seeds_note(scores, seeds)]
    md = to_markdown(wide, title, notes)
    routing = behaviour_table(scores, cfg.assignments)
    if routing is not None:
        md += "\n" + to_markdown(routing, f"{name} [{suite.name}]: behaviour on the test problems "
                                 f"(mean per episode, all samples), profile {cfg.profile}")
        _to_csv(routing.set_axis(_flat(routing.columns), axis=1),
                out_path.with_name(out_path.name + "_behaviour.csv"), float_format="%.3f")
    if run_dirs:
        from drmas.report.runs import load_runs

        runs = load_runs(run_dirs)
        abl = ablations.ablation_table(cfg, long, runs, k=spike_k, n_boot=n_boot)
        md += "\n" + to_markdown(abl, f"{name} [{suite.name}]: each method against the method "
                                 f"it changes, profile {cfg.profile}", [ablations.note(spike_k, n_boot)])
        _to_csv(as_numbers(abl), out_path.with_name(out_path.name + "_ablations.csv"),
                float_format="%.2f")
        stab = stability.stability_table(runs, k=spike_k, n_boot=n_boot,
                                         assignments=cfg.assignments)
        stab = stab.rename(index=lambda m: METHOD_LABEL.get(m, m), level="method")
        stab.columns = pd.MultiIndex.from_tuples([(a, stability.STATS[s]) for a, s in stab.columns])
        md += "\n" + to_markdown(stab, f"{name} [{suite.name}]: training stability per agent, "
                                 f"profile {cfg.profile}", [stability.note(spike_k, n_boot)])
        _to_csv(as_numbers(stab), out_path.with_name(out_path.name + "_stability.csv"),
                float_format="%.4f")
        write_gradnorm(runs, cfg, out_path, f"{name} [{suite.name}]")
        eff = efficiency.efficiency_table(run_dirs, n_boot=n_boot, assignments=cfg.assignments)
        if not len(eff.columns):
            raise DataError("the run folders' metrics.jsonl carry no phase timings or memory "
                            "(`time`, `memory`): written by an older drmas? Rerun the training")
        eff = eff.rename(index=lambda m: METHOD_LABEL.get(m, m), level="method")
        # its own file, not a section of <out>.md: times vary from run to run, the other
        # tables are the same bytes for the same config and seed
        atomic_write_text(out_path.with_name(out_path.name + "_efficiency.md"), to_markdown(
            eff, f"{name} [{suite.name}]: time per training step and peak memory, profile "
            f"{cfg.profile}", [efficiency.note(n_boot)]))
        _to_csv(as_numbers(eff), out_path.with_name(out_path.name + "_efficiency.csv"),
                float_format="%.2f")
    atomic_write_text(out_path.with_name(out_path.name + ".md"), md)
    _to_csv(as_numbers(wide), out_path.with_name(out_path.name + ".csv"), float_format="%.2f")
    tex = as_text(wide).to_latex(caption=title, label=f"tab:{suite.name}")
    atomic_write_text(out_path.with_name(out_path.name + ".tex"), tex.replace("Δ", "$\\Delta$").replace("−", "-"))
    write_stats(long, cfg, out_path, f"{name} [{suite.name}]", n_boot)
    return wide


def write_stats(long: pd.DataFrame, cfg: Config, out_path: Path, name: str, n_boot: int) -> None:
    """`<out>_stats.{csv,md}`: IQM per row and probability of improvement over GRPO
    (drmas/report/stats.py); files of their own, so the other tables keep their bytes."""
    from drmas.report.stats import note, stats_table

    table = stats_table(long, cfg.assignments, n_boot=n_boot)
    if table is None:
        return
    table = table.rename(index=lambda m: METHOD_LABEL.get(m, m), level="method")
    _to_csv(as_numbers(table), out_path.with_name(out_path.name + "_stats.csv"),
            float_format="%.2f")
    shown = table.set_axis(pd.MultiIndex.from_tuples(
        [(a, f"{m}: {s}") for a, m, s in table.index], names=["assignment", "method"]))
    atomic_write_text(out_path.with_name(out_path.name + "_stats.md"), to_markdown(
        shown, f"{name}: interquartile mean and probability of improvement over GRPO (%), "
        f"profile {cfg.profile}", [note(n_boot)]))


def write_gradnorm(runs: pd.DataFrame, cfg: Config, out_path: Path, name: str) -> None:
    """`<out>_gradnorm.{csv,md}`: every method's pre-clip gradient norms per agent against
    GRPO's median on the same assignment and seed (drmas/report/gradnorm.py)."""
    from drmas.report.gradnorm import COLUMNS as gradnorm_columns
    from drmas.report.gradnorm import gradnorm_table
    from drmas.report.gradnorm import to_markdown as gradnorm_markdown

    table = gradnorm_table(runs, cfg.assignments)
    title = f"{name}: pre-clip gradient norms against GRPO's, profile {cfg.profile}"
    if table is None:                  # the files still exist: the workflow declares them
        table = pd.DataFrame(columns=gradnorm_columns, index=pd.MultiIndex.from_tuples(
            [], names=["assignment", "method", "agent"]))
    _to_csv(table, out_path.with_name(out_path.name + "_gradnorm.csv"), float_format="%.6g")
    md = gradnorm_markdown(table, title, METHOD_LABEL) if len(table) else (
        f"### {title}\n\nNo GRPO run in these runs to compare with.\n")
    atomic_write_text(out_path.with_name(out_path.name + "_gradnorm.md"), md)


def _to_csv(frame: pd.DataFrame, path: Path, **options) -> None:
    """`frame.to_csv(path, **options)`, atomically (`atomic_path`); the same bytes."""
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, **options)
