"""Checks of a command's input files and folders, run before any work starts.

Each check raises `DataError` (one line naming the file and what is wrong) for what a user or
an interrupted job can leave behind: a missing or empty file, a folder that is not a run, a
run that never finished. The commands call these first, so a mistake costs a second and
prints one line, instead of a traceback from deep inside pandas or transformers.
"""

from __future__ import annotations

from pathlib import Path

from drmas.data.io import read_json, read_jsonl, read_yaml
from drmas.errors import DataError

SCORE_KEYS = ("meta", "n", "per_source", "macro")
RUN_META_KEYS = ("assignment", "method", "seed")
METRIC_KEYS = ("step", "agents", "team_reward", "adv_diag")


def _meta_problem(meta, keys=RUN_META_KEYS) -> str | None:
    if not isinstance(meta, dict):
        return "is not a mapping"
    missing = [k for k in keys if k not in meta]
    return f"lacks {', '.join(missing)}" if missing else None


def check_scores(path) -> dict:
    """A `scores.json` written by `drmas evaluate` (for `drmas table`)."""
    scores = read_json(path, SCORE_KEYS, what="scores.json of `drmas evaluate`")
    n = scores["n"]
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise DataError(f"{path}: n must be a positive integer, got {n!r}")
    problem = _meta_problem(scores["meta"])
    if problem:
        raise DataError(f"{path}: meta {problem}")
    metrics = (f"avg@{n}", f"pass@{n}")
    parts = {**(scores["per_source"] if isinstance(scores["per_source"], dict) else {"?": None}),
             "macro": scores["macro"]}
    for source, values in parts.items():
        if not isinstance(values, dict) or not all(isinstance(values.get(m), (int, float))
                                                   for m in metrics):
            raise DataError(f"{path}: {source!r} lacks numeric {' and '.join(metrics)}")
    return scores


def check_run(run) -> None:
    """A run folder of `drmas train` with its metrics (for `drmas plot`)."""
    run = Path(run)
    if not run.is_dir():
        raise DataError(f"{run}: run folder not found")
    meta = read_yaml(run / "config.yaml", what="run config (written by `drmas train`)")
    problem = _meta_problem(meta)
    if problem:
        raise DataError(f"{run / 'config.yaml'}: {problem}")
    lines = read_jsonl(run / "metrics.jsonl", required=METRIC_KEYS)
    if not lines:
        raise DataError(f"{run / 'metrics.jsonl'}: no metrics (the run has not trained a step)")
    for i, m in enumerate(lines, start=1):
        if not (isinstance(m["agents"], dict) and isinstance(m["team_reward"], dict)
                and isinstance(m["adv_diag"], dict)):
            raise DataError(f"{run / 'metrics.jsonl'}: line {i}: agents, team_reward and "
                            "adv_diag must be objects")


def check_trained_run(run) -> str:
    """A run folder whose training finished (for `drmas evaluate --run`); its method."""
    from drmas.train import checkpoint

    run = Path(run)
    if not run.is_dir():
        raise DataError(f"{run}: run folder not found")
    meta = read_yaml(run / "config.yaml", what="run config (written by `drmas train`)")
    problem = _meta_problem(meta, ("method",))
    if problem:
        raise DataError(f"{run / 'config.yaml'}: {problem}")
    final = run / "final"
    if not (final / checkpoint.STATE).is_file():
        raise DataError(f"{run}: no final/ weights (training has not finished: rerun "
                        "`drmas train` for this run)")
    problem = checkpoint.verify(final)
    if problem:
        raise DataError(f"{final}: {problem}; rerun `drmas train` for this run to write it again")
    return meta["method"]


def check_eval_dir(path) -> None:
    """A finished evaluation folder (for `drmas evaluate --same-as`)."""
    path = Path(path)
    check_scores(path / "scores.json")
    if not (path / "samples.jsonl").is_file():
        raise DataError(f"{path / 'samples.jsonl'}: file not found")


def check_model_dirs(paths) -> None:
    """Local model folders exist (a missing warm start, a run without final weights).
    A name that is no local path may be a hub id; loading says whether it is one."""
    for path in paths:
        name = str(path)        # hub ids are "name" or "org/name"
        looks_local = Path(name).is_absolute() or name.count("/") >= 2 or name.startswith(".")
        if looks_local and not Path(name).is_dir():
            raise DataError(f"{name}: model folder not found (warm-start or train it first: "
                            "the workflow does, `snakemake --cores all`)")
