"""`drmas prepare` checks its rows before it writes any: no problem in two splits (train/test
contamination, by question text after normalisation), no NaN or infinite gold answer; and it
writes its files all or nothing."""

import json

import pytest
import yaml

from drmas.cli import main as cli
from drmas.data.io import validate_prepared
from drmas.data.prepare import check_no_overlap, question_key
from drmas.errors import DataError
from repo import REPO as ROOT

CONFIG = ROOT / "config" / "default.yaml"


def run(capsys, *argv):
    status = cli.main([str(a) for a in argv])
    return status, [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def bench(tmp_path, train, test):
    raw = yaml.safe_load((ROOT / "benchmarks" / "math.yaml").read_text())
    raw["datasets"] = {"default": {"kind": "hub", "train": train, "test": test}}
    path = tmp_path / "math.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def records(path, texts, answer="1"):
    path.write_text("".join(json.dumps({"problem": t, "answer": answer}) + "\n" for t in texts))
    return str(path)


def test_train_and_test_from_one_file_is_contamination(tmp_path, capsys):
    data = records(tmp_path / "a.jsonl", [f"What is {i} + 1?" for i in range(4)])
    suite = bench(tmp_path, [{"source": "math500", "path": data}], [{"source": "math500", "path": data}])
    out = tmp_path / "out"
    status, err = run(capsys, "prepare", "--config", CONFIG, "--suite", suite, "--out", out)
    assert status == 2
    assert err == [f"drmas prepare: error: {out}: 4 test problem(s) also in train (train/test "
                   "contamination), e.g. test 'math500-0' = train 'math500-0' (same question text "
                   "after normalisation)"]
    assert not out.exists() or not any(out.iterdir())


def test_overlap_is_found_after_normalisation():
    assert question_key("What is  1 +\n1?") == question_key("WHAT IS 1 + 1?")
    rows = {"train": [{"id": "t1", "question": "What is 1 + 1?"}],
            "test": [{"id": "x", "question": "what is 1 +  1?"}, {"id": "y", "question": "2 + 2?"}]}
    with pytest.raises(DataError, match=r"1 test problem\(s\) also in train .* test 'x' = train 't1'"):
        check_no_overlap(rows, "out")
    check_no_overlap({"train": rows["train"], "test": rows["test"][1:]}, "out")


def test_a_nan_gold_answer_is_refused(tmp_path, capsys):
    train = tmp_path / "train.jsonl"
    train.write_text('{"problem": "What is 0/0?", "answer": NaN}\n')
    test = records(tmp_path / "test.jsonl", ["What is 2 + 2?"])
    suite = bench(tmp_path, [{"source": "math500", "path": str(train)}], [{"source": "math500", "path": test}])
    status, err = run(capsys, "prepare", "--config", CONFIG, "--suite", suite, "--out", tmp_path / "out")
    assert status == 2 and len(err) == 1
    assert "answers must be finite numbers or text, got nan" in err[0]


@pytest.mark.parametrize("answer", ["nan", "NaN", "-inf", "Infinity"])
def test_a_prepared_row_with_a_non_finite_answer_is_refused(answer):
    row = {"id": "a", "data_source": "s", "question": "q", "answers": [answer], "split": "test"}
    with pytest.raises(DataError, match=rf"f:1: gold answer '{answer}' is a non-finite number"):
        validate_prepared([row], "f")


def test_a_failed_prepare_leaves_the_previous_set_whole(tmp_path, capsys):
    train = records(tmp_path / "train.jsonl", [f"What is {i} + 1?" for i in range(4)])
    test = records(tmp_path / "test.jsonl", [f"What is {i} + 2?" for i in range(4)])
    out = tmp_path / "out"
    good = bench(tmp_path, [{"source": "math500", "path": train}], [{"source": "math500", "path": test}])
    assert run(capsys, "prepare", "--config", CONFIG, "--suite", good, "--out", out)[0] == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert set(before) == {"corpus.jsonl", "train.jsonl", "test.jsonl"}
    train2 = records(tmp_path / "train2.jsonl", [f"What is {i} + 5?" for i in range(4)])
    twice = [{"source": "math500", "path": test, "limit": 2}] * 2        # duplicate test ids
    bad = bench(tmp_path, [{"source": "math500", "path": train2}], twice)
    status, err = run(capsys, "prepare", "--config", CONFIG, "--suite", bad, "--out", out)
    assert status == 2 and err == [f"drmas prepare: error: {out / 'test.jsonl'}:3: duplicate id "
                                   "'math500-0' (first at line 1)"]
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before    # train.jsonl untouched
