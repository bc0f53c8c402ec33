"""`drmas table` / `plot` check what they mix (suite, split, one file per run), their flags
go through their config keys' bounds, their output names keep every dot, and every scores
or metrics read is bounded: one line and exit 2 for each bad input below, never an
"unexpected error"."""

import json
import os

import pytest

from drmas.cli import main as cli
from repo import REPO as ROOT
from runs import fake_run, scores_file

CONFIG = ROOT / "config" / "default.yaml"
MATH = ROOT / "benchmarks" / "math.yaml"


def run(capsys, *argv):
    status = cli.main([str(a) for a in argv])
    return status, [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def table(capsys, tmp_path, *files, extra=()):
    return run(capsys, "table", "--config", CONFIG, "--suite", MATH, "--scores", *files,
               "--out", tmp_path / "t" / "math", *extra)


def edited(path, **meta):
    data = json.loads(open(path).read())
    data["meta"].update(meta)
    open(path, "w").write(json.dumps(data))
    return path


def two(tmp_path):
    return [scores_file(tmp_path, "shared", "grpo", s, {"a": [16, 4, 8]}) for s in (0, 1)]


def test_a_heldout_scores_file_is_refused_by_name(tmp_path, capsys):
    files = two(tmp_path)
    edited(files[1], split="heldout")
    status, err = table(capsys, tmp_path, *files)
    assert status == 2
    assert err == [f"drmas table: error: {files[1]}: scores of the 'heldout' split; a table is of "
                   "the 'test' split only"]


def test_another_suites_scores_are_refused(tmp_path, capsys):
    files = two(tmp_path)
    edited(files[0], suite="search")
    status, err = table(capsys, tmp_path, *files)
    assert status == 2 and err == [f"drmas table: error: {files[0]}: scores of suite 'search', not "
                                   "of 'math' (the --suite of this table)"]


def test_two_scores_files_of_one_run_are_refused(tmp_path, capsys):
    files = two(tmp_path)
    copy = tmp_path / "copy.json"
    copy.write_text(open(files[0]).read())
    for extra in ([str(copy)], [files[0]]):            # another file of the run; the same file twice
        status, err = table(capsys, tmp_path, *files, *extra)
        assert status == 2 and len(err) == 1
        assert "a second scores file of assignment 'shared', method 'grpo', seed 0" in err[0]


def test_old_scores_without_split_still_tabulate_and_new_ones_with_test_too(tmp_path, capsys):
    files = two(tmp_path)
    edited(files[1], split="test")
    status, err = table(capsys, tmp_path, *files)
    assert status == 0, err


@pytest.mark.parametrize("change, message", [
    (lambda d: d["meta"].update(seed="0"), "meta.seed must be an integer >= 0, got '0'"),
    (lambda d: d["per_problem"]["a"].update(p0=[16]), "per_problem.a.p0: expected [samples, successes]"),
    (lambda d: d["per_problem"]["a"].update(p0=[16, 17]), "per_problem.a.p0: expected"),
    (lambda d: d["per_problem"]["a"].update(p0="x"), "per_problem.a.p0: expected"),
    (lambda d: d.update(per_problem=[1]), "per_problem must be an object"),
])
def test_malformed_scores_are_one_line(tmp_path, capsys, change, message):
    path = scores_file(tmp_path, "shared", "grpo", 0, {"a": [16, 4]})
    data = json.loads(open(path).read())
    change(data)
    open(path, "w").write(json.dumps(data))
    status, err = table(capsys, tmp_path, path)
    assert status == 2 and len(err) == 1 and message in err[0], err


@pytest.mark.parametrize("flags, message", [
    (["--spike-k", "-1"], "argument --spike-k: report.spike_k: -1.0 is less than or equal to the minimum of 1"),
    (["--spike-k", "0"], "argument --spike-k: report.spike_k: 0.0 is less than or equal"),
    (["--n-boot", "0"], "argument --n-boot: report.n_boot: 0 is less than the minimum of 100"),
    (["--n-boot", "-5"], "argument --n-boot: report.n_boot: -5 is less than the minimum of 100"),
    (["--n-boot", "10000000"], "argument --n-boot: report.n_boot: 10000000 is greater than the maximum"),
    (["--spike-k", "nan"], "report.spike_k: nan is not a finite number"),
])
def test_flags_go_through_their_config_keys_bounds(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as exit_:
        table(capsys, tmp_path, *two(tmp_path), extra=flags)
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and len(err) == 1 and message in err[0], err


@pytest.mark.parametrize("argv, message", [
    (["watch", "--interval", "0", "x"], "argument --interval: must be between 0.1 and 3600, got 0"),
    (["watch", "--interval", "-1", "x"], "argument --interval: must be between 0.1 and 3600"),
    (["prepare", "--config", CONFIG, "--suite", MATH, "--out", ""], "argument --out: an empty path"),
    (["tokenizer", "--config", CONFIG, "--suite", MATH, "--data", "d", "--out", " "],
     "argument --out: an empty path"),
    (["train", "--config", CONFIG, "--suite", MATH, "--data", "d", "--assignment", "shared",
      "--method", "grpo", "--seed", "0", "--out", ""], "argument --out: an empty path"),
    (["evaluate", "--config", CONFIG, "--suite", MATH, "--data", "d", "--out", ""],
     "argument --out: an empty path"),
    (["index", "--config", CONFIG, "--suite", MATH, "--corpus", "c", "--out", ""],
     "argument --out: an empty path"),
    (["table", "--config", CONFIG, "--suite", MATH, "--scores", "x", "--out", "sub/"],
     "argument --out: 'sub/' names a folder"),
])
def test_usage_errors_are_one_line(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_:
        cli.main([str(a) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and len(err) == 1 and message in err[0], err


def test_a_dotted_out_keeps_its_dot(tmp_path, capsys):
    status, err = run(capsys, "table", "--config", CONFIG, "--suite", MATH, "--scores",
                      *two(tmp_path), "--out", tmp_path / "x" / "k1.5")
    assert status == 0, err
    names = sorted(os.listdir(tmp_path / "x"))
    assert {"k1.5.md", "k1.5.csv", "k1.5.tex"} <= set(names) and "k1.md" not in names


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_a_device_or_fifo_is_refused_before_it_is_read(tmp_path, capsys, special):
    path = special
    if special == "fifo":
        path = tmp_path / "fifo"
        os.mkfifo(path)
    status, err = table(capsys, tmp_path, path)
    kind = "a device" if special == "/dev/zero" else "a FIFO"
    assert status == 2 and err == [f"drmas table: error: {path}: is {kind}, not a regular file "
                                   "(scores.json of `drmas evaluate`)"]


def test_plot_refuses_another_suites_run_and_a_run_twice(tmp_path, capsys):
    norms = {"solver": lambda s: 1.0, "verifier": lambda s: 1.0}
    factors = {"solver": 1.0, "verifier": 1.0}
    mine = fake_run(tmp_path / "runs", "shared", "grpo", 0, norms, factors)
    other = fake_run(tmp_path / "other", "shared", "drmas", 0, norms, factors)
    meta = json.loads(open(os.path.join(other, "config.yaml")).read())
    meta["suite"] = "search"
    open(os.path.join(other, "config.yaml"), "w").write(json.dumps(meta))
    argv = ("plot", "--config", CONFIG, "--suite", MATH, "--out", tmp_path / "f", "--runs")
    status, err = run(capsys, *argv, mine, other)
    assert status == 2 and err == [f"drmas plot: error: {other}: a run of suite 'search', not of "
                                   "'math' (the --suite of this command)"]
    status, err = run(capsys, *argv, mine, mine)
    assert status == 2 and "a second run folder of assignment 'shared', method 'grpo', seed 0" in err[0]
