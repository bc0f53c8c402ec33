"""Check before compute: `drmas train`, `evaluate` and `warmstart` reject bad train/test rows
(missing fields, wrong types, an empty file, duplicate ids, not UTF-8) with one line naming
file:line, before any model is built (no run folder appears); a benchmark YAML with a syntax
error is one line naming file:line:column."""

import json

import pytest

from drmas.cli.main import main
from repo import REPO as ROOT
from drmas.data.io import read_prepared, read_yaml
from drmas.errors import ConfigError, DataError

CONFIG = ROOT / "config" / "default.yaml"
MATH = ROOT / "benchmarks" / "math.yaml"


def row(i, **change):
    r = {"id": f"p{i}", "data_source": "arith-1", "question": f"{i} + 1 = ?",
         "answers": [str(i + 1)], "split": "train"}
    r.update(change)
    return {k: v for k, v in r.items() if v is not DROP}


DROP = object()


def lines(*rows):
    return "".join(json.dumps(r) + "\n" for r in rows)


# name: (file text, fragment of the message after "<file>:")
BAD_ROWS = {
    "missing answers": (lines(row(0), row(1, answers=DROP)), ":2: missing field(s) answers"),
    "missing question": (lines(row(0, question=DROP)), ":1: missing field(s) question"),
    "missing id": (lines(row(0), row(1), row(2, id=DROP)), ":3: missing field(s) id"),
    "answers a string": (lines(row(0, answers="1")),
                         ":1: answers must be a non-empty list of non-empty strings, got '1'"),
    "answers empty": (lines(row(0, answers=[])), ":1: answers must be a non-empty list"),
    "answer a number": (lines(row(0, answers=[1])), ":1: answers must be a non-empty list"),
    "question a number": (lines(row(0, question=5)),
                          ":1: question must be a non-empty string, got 5"),
    "id empty": (lines(row(0, id="")), ":1: id must be a non-empty string"),
    "duplicate ids": (lines(row(0), row(1), row(0)), ":3: duplicate id 'p0' (first at line 1)"),
    "line numbers count blank lines": (lines(row(0)) + "\n\n" + lines(row(1, answers=DROP)),
                                       ":4: missing field(s) answers"),
    "empty file": ("", ": no rows (the file is empty)"),
    "blank lines only": ("\n  \n", ": no rows (the file is empty)"),
    "not JSON": (lines(row(0)) + "{oops\n", ":2: not valid JSON"),
    "not an object": (lines(row(0)) + "[1, 2]\n", ":2: expected a JSON object, got list"),
}


@pytest.mark.parametrize("case", BAD_ROWS)
def test_read_prepared_names_file_and_line(case, tmp_path):
    text, fragment = BAD_ROWS[case]
    path = tmp_path / "train.jsonl"
    path.write_text(text)
    with pytest.raises(DataError) as err:
        read_prepared(path)
    assert str(err.value).startswith(f"{path}{fragment}"), str(err.value)
    assert "\n" not in str(err.value)


def test_latin1_file_is_named(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_bytes(json.dumps(row(0, question="Café?"), ensure_ascii=False).encode("latin-1"))
    with pytest.raises(DataError, match=r"train.jsonl: not UTF-8 text \(invalid continuation"):
        read_prepared(path)


def test_good_rows_pass(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text(lines(row(0), row(1, answers=["2", "two"])) + "\n")
    assert [r["id"] for r in read_prepared(path)] == ["p0", "p1"]


def one_error_line(capsys) -> str:
    err = [l for l in capsys.readouterr().err.splitlines() if l.strip()]
    assert len(err) == 1, err
    assert "Traceback" not in err[0]
    return err[0]


def data_dir(tmp_path, case):
    text, fragment = BAD_ROWS[case]
    data = tmp_path / "data"
    data.mkdir()
    for split in ("train", "test"):
        (data / f"{split}.jsonl").write_text(text)
    return data, fragment


COMMANDS = {
    "train": lambda d, out: ["train", "--data", d, "--assignment", "shared", "--method", "grpo",
                             "--seed", "0", "--out", out],
    "evaluate": lambda d, out: ["evaluate", "--data", d, "--assignment", "shared", "--out", out],
    "warmstart": lambda d, out: ["warmstart", "--data", d, "--tokenizer", d, "--model", "small",
                                 "--out", out],
}


@pytest.mark.parametrize("command, case", [
    ("train", "missing answers"), ("train", "empty file"), ("train", "duplicate ids"),
    ("train", "question a number"), ("evaluate", "missing id"), ("evaluate", "answers a string"),
    ("warmstart", "missing question"), ("warmstart", "empty file"),
])
def test_commands_check_rows_before_building_anything(command, case, tmp_path, capsys):
    data, fragment = data_dir(tmp_path, case)
    out = tmp_path / "out"
    name, *rest = COMMANDS[command](data, out)
    argv = [name, "--config", CONFIG, "--suite", MATH, *rest]
    assert main([str(a) for a in argv]) == 2
    split = "test" if command == "evaluate" else "train"
    assert one_error_line(capsys) == (f"drmas {command}: error: {data / f'{split}.jsonl'}"
                                      f"{fragment}")
    assert not out.exists()          # no run / eval / model folder: nothing was computed


BAD_YAML = "name: math\nmas: math\nagents: [solver, verifier\nreward: math\n"


def test_read_yaml_names_file_line_and_column(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(BAD_YAML)
    with pytest.raises(ConfigError) as err:
        read_yaml(path, what="benchmark file")
    msg = str(err.value)
    assert msg == (f"{path}:4:7: not valid YAML (expected ',' or ']', but got ':')"), msg
    with pytest.raises(ConfigError, match="benchmark file not found"):
        read_yaml(tmp_path / "nope.yaml", what="benchmark file")
    assert read_yaml(MATH)["name"] == "math"


def test_benchmark_yaml_syntax_error_is_one_line(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(BAD_YAML)
    argv = ["evaluate", "--config", CONFIG, "--suite", path, "--data", tmp_path,
            "--assignment", "shared", "--out", tmp_path / "e"]
    assert main([str(a) for a in argv]) == 2
    assert one_error_line(capsys) == (f"drmas evaluate: error: {path}:4:7: not valid YAML "
                                      "(expected ',' or ']', but got ':')")
