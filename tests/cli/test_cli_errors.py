"""One line everywhere: every `drmas` subcommand turns a user error (a missing or malformed
input, an unknown name, a bad argument) into one line on stderr and exit status 2; an
unexpected error prints one line with the log file that keeps its traceback, and exits 1.
Every CLI argument has help text."""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from drmas.cli import main as cli
from repo import REPO as ROOT
from drmas.train import checkpoint
from runs import good_scores

CONFIG = ROOT / "config" / "default.yaml"
MATH = ROOT / "benchmarks" / "math.yaml"
SUITE = ["--config", CONFIG, "--suite", MATH]


def run(capsys, *argv) -> tuple[int, str]:
    """Exit status and the one stderr line of `drmas argv` (in-process)."""
    try:
        status = cli.main([str(a) for a in argv])
    except SystemExit as exc:          # argparse
        status = exc.code
    err = [l for l in capsys.readouterr().err.splitlines() if l.strip()]
    assert len(err) == 1, err
    assert "Traceback" not in err[0]
    return status, err[0]


def scores_variant(tmp_path, change) -> Path:
    path = good_scores(tmp_path / "s" / "scores.json")
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    return path


TABLE_CASES = {   # name: (make the --scores file, expected message after "error: <path>")
    "missing file": (lambda t: t / "nope.json", ": scores.json of `drmas evaluate` not found"),
    "a folder": (lambda t: t, ": is a folder, not a scores.json of `drmas evaluate`"),
    "not JSON": (lambda t: _write(t / "s.json", "nope"), ":1: not valid JSON (Expecting value)"),
    "a list": (lambda t: _write(t / "s.json", "[]"), ": expected a JSON object, got list"),
    "empty object": (lambda t: _write(t / "s.json", "{}"),
                     ": not a scores.json of `drmas evaluate`: missing key(s) meta, n, per_source, "
                     "macro"),
    "n not an integer": (lambda t: scores_variant(t, lambda d: d.update(n="4")),
                         ": n must be a positive integer, got '4'"),
    "meta without seed": (lambda t: scores_variant(t, lambda d: d["meta"].pop("seed")),
                          ": meta lacks seed"),
    "source without pass@n": (lambda t: scores_variant(
        t, lambda d: d["per_source"]["arith-1"].pop("pass@4")),
        ": 'arith-1' lacks numeric avg@4 and pass@4"),
}


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize("case", TABLE_CASES)
def test_table_on_bad_scores(case, tmp_path, capsys):
    make, message = TABLE_CASES[case]
    path = make(tmp_path)
    status, line = run(capsys, "table", *SUITE, "--scores", path, "--out", tmp_path / "t" / "math")
    assert status == 2
    assert line == f"drmas table: error: {path}{message}"
    assert not (tmp_path / "t").exists()


def test_table_on_good_scores_writes_it(tmp_path, capsys):
    path = good_scores(tmp_path / "scores.json")
    assert cli.main([str(a) for a in ["table", *SUITE, "--scores", path, "--out", tmp_path / "math"]]) == 0
    assert "| shared | GRPO | 50.0 | 75.0 |" in (tmp_path / "math.md").read_text()


def make_run(path: Path, metrics: str | None = "default", final: bool = True) -> Path:
    path.mkdir(parents=True)
    (path / "config.yaml").write_text("assignment: shared\nmethod: grpo\nseed: 0\n")
    if metrics == "default":
        metrics = json.dumps({"step": 1, "agents": {}, "team_reward": {"mean": 0.0},
                              "adv_diag": {}}) + "\n"
    if metrics is not None:
        (path / "metrics.jsonl").write_text(metrics)
    return path


PLOT_CASES = {
    "missing run folder": (lambda t: t / "nope", lambda r: f"{r}: run folder not found"),
    "no config.yaml": (lambda t: _unlink(make_run(t / "r"), "config.yaml"),
                       lambda r: f"{r}/config.yaml: run config (written by `drmas train`) not found"),
    "config.yaml without method": (
        lambda t: _write_in(make_run(t / "r"), "config.yaml", "assignment: shared\nseed: 0\n"),
        lambda r: f"{r}/config.yaml: lacks method"),
    "config.yaml not YAML": (
        lambda t: _write_in(make_run(t / "r"), "config.yaml", "a: [b\n"),
        lambda r: f"{r}/config.yaml:2:1: not valid YAML (expected ',' or ']', but got "
                  "'<stream end>')"),
    "no metrics": (lambda t: make_run(t / "r", metrics=None),
                   lambda r: f"{r}/metrics.jsonl: file not found"),
    "empty metrics": (lambda t: make_run(t / "r", metrics=""),
                      lambda r: f"{r}/metrics.jsonl: no metrics (the run has not trained a step)"),
    "metrics line cut": (lambda t: make_run(t / "r", metrics='{"step": 1, "ag'),
                         lambda r: f"{r}/metrics.jsonl:1: not valid JSON (Unterminated string "
                                   "starting at, column 13)"),
    "metrics without theory": (lambda t: make_run(t / "r", metrics='{"step": 1, "agents": {}, '
                                                  '"team_reward": {}}\n'),
                               lambda r: f"{r}/metrics.jsonl:1: missing field(s) adv_diag"),
}


def _unlink(run: Path, name: str) -> Path:
    (run / name).unlink()
    return run


def _write_in(run: Path, name: str, text: str) -> Path:
    (run / name).write_text(text)
    return run


@pytest.mark.parametrize("case", PLOT_CASES)
def test_plot_on_bad_runs(case, tmp_path, capsys):
    make, message = PLOT_CASES[case]
    r = make(tmp_path)
    status, line = run(capsys, "plot", *SUITE, "--runs", r, "--out", tmp_path / "figs")
    assert (status, line) == (2, f"drmas plot: error: {message(r)}")
    assert not (tmp_path / "figs").exists()


def evaluate(capsys, tmp_path, *extra):
    return run(capsys, "evaluate", *SUITE, "--data", tmp_path / "data", "--assignment", "shared",
               "--out", tmp_path / "e", *extra)


def test_evaluate_on_bad_inputs(tmp_path, capsys, math_rows, monkeypatch):
    from drmas.data.io import write_jsonl

    monkeypatch.chdir(tmp_path)                     # no results/ here: nothing warm-started
    write_jsonl(tmp_path / "data" / "test.jsonl", [r for r in math_rows if r["split"] == "test"])
    e = "drmas evaluate: error: "
    assert evaluate(capsys, tmp_path, "--run", tmp_path / "nope") == (
        2, e + f"{tmp_path / 'nope'}: run folder not found")
    unfinished = make_run(tmp_path / "unfinished")
    assert evaluate(capsys, tmp_path, "--run", unfinished) == (
        2, e + f"{unfinished}: no final/ weights (training has not finished: rerun `drmas train` "
               "for this run)")
    damaged = make_run(tmp_path / "damaged")
    (damaged / "final").mkdir()
    (damaged / "final" / "trainer.json").write_text('{"step": 3, "sampler": {"epoch": 0, "pos": 0}}')
    (damaged / "final" / "w.bin").write_text("weights")
    checkpoint.write_manifest(damaged / "final")
    (damaged / "final" / "w.bin").write_text("w")
    assert evaluate(capsys, tmp_path, "--run", damaged) == (
        2, e + f"{damaged / 'final'}: w.bin has 1 bytes, 7 were written; rerun `drmas train` for "
               "this run to write it again")
    assert evaluate(capsys, tmp_path, "--same-as", tmp_path / "nope") == (
        2, e + f"{tmp_path / 'nope' / 'scores.json'}: scores.json of `drmas evaluate` not found")
    assert evaluate(capsys, tmp_path, "--same-as", tmp_path, "--run", damaged) == (
        2, e + "--same-as reuses a base evaluation; it cannot go with --run")
    assert evaluate(capsys, tmp_path, "--same-as", tmp_path, "--split", "heldout") == (
        2, e + "--same-as copies the workflow's test evaluation; it cannot go with --split or "
               "--max-problems")
    assert evaluate(capsys, tmp_path, "--split", "heldout") == (
        2, e + f"{tmp_path / 'data' / 'heldout.jsonl'}: no held-out split; `drmas prepare` writes "
               "one for a generated suite with questions in neither train nor test (the knowledge "
               "generator's); rerun it if this folder is older")
    # the base models of the default profile are not warm-started in this folder
    status, line = evaluate(capsys, tmp_path)
    assert status == 2 and line.startswith(e + "results/default/models/math/small: model folder "
                                                "not found")
    # --base-model NAME=DIR: a folder in place of a base model, checked like the config's
    status, line = evaluate(capsys, tmp_path, "--base-model", f"small={tmp_path / 'seed1'}")
    assert status == 2 and line.startswith(e + f"{tmp_path / 'seed1'}: model folder not found")
    assert evaluate(capsys, tmp_path, "--base-model", "small") == (
        2, e + "--base-model 'small': expected NAME=DIR, e.g. small=results/default/models/math/small")
    assert evaluate(capsys, tmp_path, "--base-model", "large=x") == (
        2, e + "--base-model 'large=x': unknown model 'large'; the config's models: small, medium")
    assert evaluate(capsys, tmp_path, "--base-model", "small=x", "--run", damaged) == (
        2, e + "--base-model replaces a base model; it cannot go with --run or --same-as")
    assert not (tmp_path / "e").exists()


def test_warmstart_unknown_model_or_missing_tokenizer(tmp_path, capsys):
    args = ["warmstart", *SUITE, "--data", tmp_path, "--out", tmp_path / "w"]
    assert run(capsys, *args, "--tokenizer", tmp_path, "--model", "nosuch") == (
        2, "drmas warmstart: error: unknown model 'nosuch'; the config's models: small, medium")
    assert run(capsys, *args, "--tokenizer", tmp_path / "tok", "--model", "small") == (
        2, f"drmas warmstart: error: {tmp_path / 'tok'}: tokenizer folder not found "
           "(`drmas tokenizer` writes it)")
    assert run(capsys, *args, "--model", "small") == (
        2, "drmas warmstart: error: model 'small' is tiny: --tokenizer DIR is needed (`drmas "
           "tokenizer` writes it)")


@pytest.mark.parametrize("argv, message", [
    (["perf", "advantages", "--rows", "0"], "drmas perf advantages: error: argument --rows: must be "
                                            "between 1 and 20000000, got 0 (see `drmas perf advantages --help`)"),
    (["perf", "advantages", "--rows", "100000000000"], "drmas perf advantages: error: argument --rows: "
                                                       "must be between 1 and 20000000, got 100000000000 "
                                                       "(see `drmas perf advantages --help`)"),
    (["perf", "advantages", "--rows", "many"], "drmas perf advantages: error: argument --rows: not an "
                                               "integer: 'many' (see `drmas perf advantages --help`)"),
    (["perf", "latency"], "drmas perf: error: argument what: invalid choice: 'latency' (choose "
                          "from 'advantages', 'retrieval', 'rollout', 'step') (see `drmas perf "
                          "--help`)"),
    (["perf"], "drmas perf: error: the following arguments are required: what (see `drmas perf "
               "--help`)"),
    # an option of another benchmark: each takes only its own
    (["perf", "step", "--rows", "5"], "drmas perf step: error: unrecognized arguments: --rows 5 "
                                      "(see `drmas perf step --help`)"),
    (["perf", "advantages", "--json"], "drmas perf advantages: error: unrecognized arguments: "
                                       "--json (see `drmas perf advantages --help`)"),
    (["serve", "--index", "x", "--port", "70000"], "drmas serve: error: argument --port: must be "
                                                   "between 0 and 65535, got 70000 (see `drmas "
                                                   "serve --help`)"),
    (["train", *SUITE], "drmas train: error: the following arguments are required: --data, "
                        "--assignment, --method, --seed, --out (see `drmas train --help`)"),
    (["nosuch"], "drmas: error: argument command: invalid choice: 'nosuch' (choose from 'prepare', "
                 "'tokenizer', ...) (see `drmas --help`)"),
])
def test_bad_arguments_are_one_line(argv, message, capsys):
    status, line = run(capsys, *argv)
    head, cut, tail = message.partition("...")      # `...`: the rest of a long list
    assert status == 2
    assert (line.startswith(head) and line.endswith(tail)) if cut else line == message


def test_unexpected_error_keeps_its_traceback_in_a_log(tmp_path, capsys, monkeypatch):
    def bug(**_):
        raise RuntimeError("a bug\nwith two lines")

    from drmas.bench import advantages as perf
    monkeypatch.setattr(perf, "main_advantages", bug)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    status, line = run(capsys, "perf", "advantages", "--rows", "10")
    [log] = tmp_path.glob("drmas-perf-*.log")
    assert status == 1
    assert line == f"drmas perf: unexpected error: RuntimeError: a bug with two lines (full " \
                   f"traceback in {log})"
    text = log.read_text()
    assert "Traceback (most recent call last)" in text and 'raise RuntimeError("a bug' in text


def test_unexpected_error_log_goes_beside_the_output(tmp_path, capsys, monkeypatch):
    def bug(*_, **__):
        raise KeyError("per_source")

    monkeypatch.setattr("drmas.report.tables.write_table", bug)
    scores = good_scores(tmp_path / "scores.json")
    status, line = run(capsys, "table", *SUITE, "--scores", scores, "--out", tmp_path / "t" / "math")
    log = tmp_path / "t" / "math.error.log"
    assert status == 1
    assert line == f"drmas table: unexpected error: KeyError: 'per_source' (full traceback in {log})"
    assert "Traceback" in log.read_text()


def test_real_process_prints_one_line_and_exits_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "drmas.cli", "table", *map(str, SUITE),
                           "--scores", str(tmp_path / "nope.json"), "--out", str(tmp_path / "t")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr == (f"drmas table: error: {tmp_path / 'nope.json'}: scores.json of "
                           "`drmas evaluate` not found\n")


def _subcommands(parser, prefix=""):
    """(name, parser) of every subcommand, nested ones (`perf step`) included."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sp in action.choices.items():
                yield f"{prefix}{name}", sp
                yield from _subcommands(sp, f"{prefix}{name} ")


def test_every_argument_has_help():
    subcommands = dict(_subcommands(cli.build_parser()))
    missing = [f"{name} {action.dest}" for name, sp in subcommands.items() for action in sp._actions
               if action.dest != "help" and not action.help]
    assert not missing, missing
    assert len(subcommands) >= 10
    assert {"perf advantages", "perf retrieval", "perf rollout", "perf step"} <= set(subcommands)


@pytest.mark.parametrize("argv, values", [
    (["perf", "advantages", "--rows", "1000"], {"rows": 1000, "seed": 0}),
    (["perf", "step", "--model", "tiny", "--steps", "5"],
     {"model": "tiny", "steps": 5, "warmup": 1, "dtype": "float32", "threads": None, "json": False,
      "no_shared_prefix": False, "device": "cpu"}),
    (["perf", "step", "--no-shared-prefix", "--device", "cuda"],
     {"model": "tiny", "steps": 5, "warmup": 1, "dtype": "float32", "threads": None, "json": False,
      "no_shared_prefix": True, "device": "cuda"}),
    (["perf", "rollout", "--dtype", "bfloat16", "--json"],
     {"model": "tiny", "steps": 5, "dtype": "bfloat16", "threads": None, "json": True}),
    (["perf", "retrieval", "--index", "X"],
     {"index": "X", "url": None, "peer_url": None, "queries": None, "clients": [8, 64],
      "seconds": 10.0, "rounds": 5, "batch_size": 8, "warmup_s": 10.0, "threads": 1, "out": None}),
])
def test_perf_benchmarks_take_only_their_own_options(argv, values):
    args = vars(cli.build_parser().parse_args(argv))
    fn = args.pop("fn")
    assert args == {"command": "perf", "what": argv[1], **values}
    assert fn.__module__ == "drmas.cli.perf"


def test_unreachable_hub_model_names_the_id_and_the_path_override(tmp_path):
    """A hub id that cannot be loaded (HF_HUB_OFFLINE stands in for no network, which takes
    the hub client a minute of retries here) fails in one line naming it and `path:`."""
    code = ("from drmas.errors import ConfigError\nfrom drmas.models.tiny import load_model\n"
            "try:\n    load_model('nosuch-org/nosuch-model')\n"
            "except ConfigError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path, env={**os.environ, "HF_HUB_OFFLINE": "1"}).stdout.strip()
    assert out.startswith("cannot load model from nosuch-org/nosuch-model: no such local folder")
    assert "set the model's `path:` in the profile" in out and len(out.splitlines()) == 1


@pytest.mark.parametrize("extra, cap", [([], 60), (["--max-problems", "2"], 2), (["--max-problems", "0"], None)])
def test_evaluate_reads_the_split_asked_with_its_cap(tmp_path, capsys, monkeypatch, extra, cap):
    """`--split heldout` evaluates heldout.jsonl, `--max-problems` replaces the config's cap (0:
    every problem), and the split is named in the scores' meta. The evaluation itself is
    replaced by a recorder: this checks what the command hands it."""
    from drmas.cli import inputs
    from drmas.data.io import write_jsonl
    from drmas.evaluation import runner

    rows = [{"id": f"h{i}", "data_source": "addsub-1", "question": f"{i} + 1", "answers": [str(i + 1)],
             "split": "heldout"} for i in range(3)]
    write_jsonl(tmp_path / "data" / "heldout.jsonl", rows)
    seen = {}

    def recorder(cfg, suite, assignment, rows, out, **kw):
        seen.update(cap=cfg.eval.max_problems_per_source, ids=[r["id"] for r in rows], meta=kw["meta"])
        return {"overall": {}}

    monkeypatch.setattr(runner, "evaluate", recorder)
    monkeypatch.setattr(inputs, "check_model_dirs", lambda paths: list(paths))
    assert cli.main([
        "evaluate", *map(str, SUITE), "--data", str(tmp_path / "data"), "--assignment", "shared",
        "--split", "heldout", "--out", str(tmp_path / "e"), *extra]) in (0, None)
    assert seen == {"cap": cap, "ids": ["h0", "h1", "h2"],
                    "meta": {"suite": "math", "assignment": "shared", "seed": 0, "method": "base",
                             "split": "heldout"}}
