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
    _check_score_meta(path, scores["meta"])
    _check_per_problem(path, scores.get("per_problem"), n)
    return scores


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_score_meta(path, meta: dict) -> None:
    """The identity of an evaluation: names are strings, the seed an integer >= 0 (a seed
    "0" beside a seed 0 would be two seeds of one run), suite and split strings if present."""
    for key in ("assignment", "method") + tuple(k for k in ("suite", "split") if k in meta):
        if not isinstance(meta[key], str) or not meta[key]:
            raise DataError(f"{path}: meta.{key} must be a non-empty string, got {meta[key]!r:.60}")
    if not _is_int(meta["seed"]) or meta["seed"] < 0:
        raise DataError(f"{path}: meta.seed must be an integer >= 0, got {meta['seed']!r:.60}")


def _check_per_problem(path, per_problem, n: int) -> None:
    """`per_problem` (when present): {data_source: {problem id: [samples, successes]}} with
    samples >= n and 0 <= successes <= samples, as `drmas evaluate` writes it."""
    if per_problem is None:
        return
    if not isinstance(per_problem, dict):
        raise DataError(f"{path}: per_problem must be an object, got {type(per_problem).__name__}")
    for source, counts in per_problem.items():
        if not isinstance(counts, dict):
            raise DataError(f"{path}: per_problem.{source} must be an object of problem ids")
        for pid, pair in counts.items():
            if not (isinstance(pair, list) and len(pair) == 2 and all(map(_is_int, pair))
                    and pair[0] >= n and 0 <= pair[1] <= pair[0]):
                raise DataError(f"{path}: per_problem.{source}.{pid}: expected [samples, "
                                f"successes] with samples >= n = {n} and 0 <= successes <= "
                                f"samples, got {pair!r:.60}")


def check_score_set(paths, scores: list[dict], suite: str, split: str = "test") -> None:
    """scores.json files that go into one table: each of suite `suite` and of split `split`
    (from its own `meta`; a file without `meta.split`, as `drmas evaluate` wrote them
    before it recorded the test split, is of the test split), and no two of one run
    (assignment, method, seed): averaging them would count a run twice."""
    first: dict[tuple, str] = {}
    for path, s in zip(paths, scores):
        meta = s["meta"]
        if meta.get("suite", suite) != suite:
            raise DataError(f"{path}: scores of suite {meta['suite']!r}, not of {suite!r} "
                            "(the --suite of this table)")
        if meta.get("split", "test") != split:
            raise DataError(f"{path}: scores of the {meta['split']!r} split; a table is of the "
                            f"{split!r} split only")
        _counted_once(first, meta, path, "scores file")


def _counted_once(first: dict, meta: dict, path, what: str) -> None:
    """Refuse a second `what` of one run (assignment, method, seed); `first` maps each run
    seen so far to its file."""
    key = (meta["assignment"], meta["method"], meta["seed"])
    if key in first:
        raise DataError(f"{path}: a second {what} of assignment {key[0]!r}, method {key[1]!r}, "
                        f"seed {key[2]} (the first: {first[key]}); each run is counted once")
    first[key] = str(path)


def check_run_set(runs, suite: str) -> None:
    """Run folders that go into one table or figure set: each of suite `suite` (its
    config.yaml's `suite`, when it has one) and no two of one run (assignment, method, seed)."""
    first: dict[tuple, str] = {}
    for run in runs:
        meta = read_yaml(Path(run) / "config.yaml", what="run config (written by `drmas train`)")
        if meta.get("suite", suite) != suite:
            raise DataError(f"{run}: a run of suite {meta['suite']!r}, not of {suite!r} (the "
                            "--suite of this command)")
        _counted_once(first, meta, run, "run folder")


def check_run(run) -> None:
    """A run folder of `drmas train` with its metrics (for `drmas plot`)."""
    run = Path(run)
    if not run.is_dir():
        raise DataError(f"{run}: run folder not found")
    meta = read_yaml(run / "config.yaml", what="run config (written by `drmas train`)")
    problem = _meta_problem(meta)
    if problem:
        raise DataError(f"{run / 'config.yaml'}: {problem}")
    _check_score_meta(run / "config.yaml", meta)
    from drmas.report.runs import is_number

    lines = read_jsonl(run / "metrics.jsonl", required=METRIC_KEYS)
    if not lines:
        raise DataError(f"{run / 'metrics.jsonl'}: no metrics (the run has not trained a step)")
    for i, m in enumerate(lines, start=1):
        if not (isinstance(m["agents"], dict) and isinstance(m["team_reward"], dict)
                and isinstance(m["adv_diag"], dict)):
            raise DataError(f"{run / 'metrics.jsonl'}: line {i}: agents, team_reward and "
                            "adv_diag must be objects")
        for agent, a in m["agents"].items():
            norm = a.get("grad_norm") if isinstance(a, dict) else None
            if not isinstance(a, dict) or (norm is not None and not is_number(norm)):
                raise DataError(f"{run / 'metrics.jsonl'}: line {i}: agents.{agent}.grad_norm "
                                f"must be a number (NaN and infinities are counted), got "
                                f"{norm!r:.60}")


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
