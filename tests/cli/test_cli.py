"""The command line: user errors are one line on stderr with exit status 2, never a traceback."""

import subprocess
import sys

import yaml

from repo import REPO as ROOT


def drmas(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "drmas.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def assert_one_line_error(proc, *fragments):
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, proc.stderr
    for f in fragments:
        assert f in lines[0], lines[0]


def write_config(tmp_path, **change):
    raw = yaml.safe_load((ROOT / "config" / "default.yaml").read_text())
    for dotted, value in change.items():
        node = raw
        *parents, last = dotted.split("__")
        for p in parents:
            node = node[p]
        node[last] = value
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_wrong_type_in_config(tmp_path):
    cfg = write_config(tmp_path, train__steps="many")
    proc = drmas("prepare", "--config", cfg, "--suite", ROOT / "benchmarks/math.yaml", "--out", tmp_path)
    assert_one_line_error(proc, "train.steps", "not of type 'integer'")


def test_out_of_range_in_config(tmp_path):
    cfg = write_config(tmp_path, eval__temperature=-1)
    proc = drmas("prepare", "--config", cfg, "--suite", ROOT / "benchmarks/math.yaml", "--out", tmp_path)
    assert_one_line_error(proc, "eval.temperature")


def test_unknown_method(tmp_path, math_rows):
    from drmas.data.io import write_jsonl

    write_jsonl(tmp_path / "train.jsonl", [r for r in math_rows if r["split"] == "train"])
    proc = drmas("train", "--config", ROOT / "config/default.yaml", "--suite", ROOT / "benchmarks/math.yaml",
                 "--data", tmp_path, "--assignment", "shared", "--method", "ppo", "--seed", 0,
                 "--out", tmp_path / "run")
    assert_one_line_error(proc, "ppo", "grpo", "drmas")


def test_unknown_agent_in_suite(tmp_path):
    spec = yaml.safe_load((ROOT / "benchmarks/math.yaml").read_text())
    spec["agents"] = ["solver", "critic"]
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(spec))
    proc = drmas("prepare", "--config", ROOT / "config/default.yaml", "--suite", tmp_path / "bad.yaml",
                 "--out", tmp_path)
    assert_one_line_error(proc, "unknown agent 'critic'")


def test_malformed_jsonl_names_file_and_line(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    good = '{"id": "a", "data_source": "s", "question": "q", "answers": ["1"], "split": "train"}'
    (data / "train.jsonl").write_text(good + "\n" + good.replace('"a"', '"b"') + "\n{oops\n")
    proc = drmas("train", "--config", ROOT / "config/default.yaml", "--suite", ROOT / "benchmarks/math.yaml",
                 "--data", data, "--assignment", "shared", "--method", "grpo", "--seed", 0,
                 "--out", tmp_path / "run")
    assert_one_line_error(proc, "train.jsonl:3")


def test_prepare_writes_valid_splits(tmp_path):
    proc = drmas("prepare", "--config", ROOT / "config/default.yaml", "--suite", ROOT / "benchmarks/math.yaml",
                 "--out", tmp_path)
    assert proc.returncode == 0, proc.stderr
    from drmas.data.io import read_jsonl

    train, test = read_jsonl(tmp_path / "train.jsonl"), read_jsonl(tmp_path / "test.jsonl")
    heldout = read_jsonl(tmp_path / "heldout.jsonl")
    assert {r["data_source"] for r in test} == {"addsub-3", "distract-2", "carry-2"}
    assert len(test) == 3 * 60 and len(train) >= 4000 and len(heldout) == 3 * 100
    questions = [r["question"] for r in train + test + heldout]
    assert len(set(questions)) == len(train) + len(test) + len(heldout)   # no question in two splits
