"""Dataset loaders: bundled files, local copies in hub shapes, and offline hub failures."""

from __future__ import annotations

import json
import re
import sys
import types

import pytest

from drmas.data import hub
from drmas.data.hub import SOURCES, bundled_path, load_source
from drmas.data.io import validate_prepared, write_jsonl
from drmas.errors import ConfigError, DataError


def test_bundled_math500():
    rows = load_source("math500", path="bundled", split="test")
    assert len(rows) == 500
    validate_prepared(rows, "math500")
    assert {r["data_source"] for r in rows} == {"math500"}
    assert {r["split"] for r in rows} == {"test"}
    assert all(isinstance(r["answers"], list) and r["answers"] and all(
        isinstance(a, str) and a for a in r["answers"]) for r in rows)
    assert rows[0]["question"].startswith("Convert the point $(0,3)$")
    assert rows[0]["answers"] == ["\\left( 3, \\frac{\\pi}{2} \\right)"]


def test_bundled_aime2024():
    rows = load_source("aime2024", path="bundled", split="test")
    assert len(rows) == 30
    validate_prepared(rows, "aime2024")
    assert {r["data_source"] for r in rows} == {"aime2024"}
    assert all(a.isdigit() for r in rows for a in r["answers"])


def test_limit_and_split_label():
    rows = load_source("math500", path="bundled", split="train", limit=7)
    assert [r["id"] for r in rows] == [f"math500-{i}" for i in range(7)]
    assert {r["split"] for r in rows} == {"train"}
    assert load_source("aime2024", path="bundled", split="test", limit=0) == []
    with pytest.raises(ConfigError, match="limit"):
        load_source("aime2024", path="bundled", split="test", limit=-1)


def test_bundled_path_only_for_bundled_sets():
    assert bundled_path("math500").is_file()
    with pytest.raises(ConfigError, match="no bundled copy of 'amc23'"):
        load_source("amc23", path="bundled", split="test")


def test_registry_covers_the_paper_datasets():
    ids = {s.hub_id for s in SOURCES.values()}
    assert ids == {"aaabiao/dapo_filter", "HuggingFaceH4/MATH-500", "HuggingFaceH4/aime_2024",
                   "MathArena/aime_2025", "realtreetune/olympiadbench", "knoveleng/AMC-23",
                   "zwhe99/simplerl-minerva-math", "PeterJinGo/nq_hotpotqa_train"}


def test_unknown_source_without_path():
    with pytest.raises(ConfigError, match="unknown dataset 'gsm9k'"):
        load_source("gsm9k", split="test")


def test_malformed_jsonl_names_file_and_line(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"problem": "1+1?", "answer": "2"}\n{"problem": oops}\n', encoding="utf-8")
    with pytest.raises(DataError, match=re.escape(f"{path}:2: not valid JSON")):
        load_source("math500", path=str(path), split="test")


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match="file not found"):
        load_source("math500", path=str(tmp_path / "none.jsonl"), split="test")


def test_unsupported_suffix(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("problem,answer\n", encoding="utf-8")
    with pytest.raises(DataError, match="unsupported file type .csv"):
        load_source("math500", path=str(path), split="test")


def test_missing_field_is_named(tmp_path):
    path = tmp_path / "m.jsonl"
    write_jsonl(path, [{"problem": "1+1?", "answer": "2"}, {"problem": "2+2?"}])
    with pytest.raises(DataError, match=r"m.jsonl record 2: no answers field \(tried answer"):
        load_source("math500", path=str(path), split="test")


def test_dapo_shape_from_local_json(tmp_path):
    """A verl-style record: a message list and reward_model.ground_truth; suffix removed."""
    suffix = " Let's think step by step and output the final answer within \\boxed{}."
    records = [{"prompt": [{"role": "user", "content": "What is 6*7?" + suffix}],
                "reward_model": {"style": "rule", "ground_truth": "42"}, "ability": "math"}]
    path = tmp_path / "dapo.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    (row,) = load_source("dapo", path=str(path), split="train")
    assert row == {"id": "dapo-0", "data_source": "dapo", "question": "What is 6*7?",
                   "answers": ["42"], "split": "train"}


def test_search_shape_keeps_per_row_source(tmp_path):
    path = tmp_path / "nq.jsonl"
    write_jsonl(path, [
        {"id": "train_0", "question": "who wrote hamlet?", "golden_answers": ["Shakespeare",
                                                                              "W. Shakespeare"],
         "data_source": "nq"},
        {"id": "train_1", "question": "capital of france?",
         "reward_model": {"ground_truth": {"target": ["Paris"]}}, "data_source": "hotpotqa"},
    ])
    rows = load_source("nq_hotpotqa", path=str(path), split="test")
    assert [(r["id"], r["data_source"], r["answers"]) for r in rows] == [
        ("nq-0", "nq", ["Shakespeare", "W. Shakespeare"]), ("hotpotqa-1", "hotpotqa", ["Paris"])]


def test_numeric_answers_and_field_override(tmp_path):
    path = tmp_path / "amc.jsonl"
    write_jsonl(path, [{"Q": "a?", "A": 27.0}, {"Q": "b?", "A": 2.5}, {"Q": "c?", "A": 3}])
    rows = load_source("amc23", path=str(path), split="test",
                       fields={"question": "Q", "answers": "A"})
    assert [r["answers"] for r in rows] == [["27"], ["2.5"], ["3"]]
    with pytest.raises(ConfigError, match="unknown field override"):
        load_source("amc23", path=str(path), split="test", fields={"solution": "S"})


def test_unregistered_local_dataset(tmp_path):
    path = tmp_path / "mine.jsonl"
    write_jsonl(path, [{"question": "q?", "answers": ["a", "b"]}])
    assert load_source("mine", path=str(path), split="test")[0]["answers"] == ["a", "b"]


def test_parquet(tmp_path):
    pd = pytest.importorskip("pandas")
    path = tmp_path / "m.parquet"
    try:
        pd.DataFrame({"problem": ["1+1?"], "answer": ["2"]}).to_parquet(path)
    except ImportError:  # no pyarrow / fastparquet: the loader must say so, in one line
        path.write_bytes(b"PAR1")
        with pytest.raises(DataError, match="parquet needs pyarrow"):
            load_source("math500", path=str(path), split="test")
        return
    assert load_source("math500", path=str(path), split="test")[0]["answers"] == ["2"]


def test_hub_without_datasets_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # import fails
    with pytest.raises(DataError, match=r"HuggingFaceH4/MATH-500.*pip install datasets.*path:"):
        load_source("math500", split="test")


def test_hub_failure_is_one_line(monkeypatch):
    calls = []

    def load_dataset(hub_id, config=None, split=None):
        calls.append((hub_id, config, split))
        raise ConnectionError("Couldn't reach 'HuggingFaceH4/aime_2024' on the Hub\n(offline)")

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    with pytest.raises(DataError) as info:
        load_source("aime2024", split="test", limit=5)
    message = str(info.value)
    assert "\n" not in message
    assert "HuggingFaceH4/aime_2024" in message and "path:" in message
    assert calls == [("HuggingFaceH4/aime_2024", None, "train[:5]")]


def test_hub_records_are_mapped(monkeypatch):
    """With a (fake) datasets package the hub path gives the same rows as a local file."""
    records = [{"problem": f"p{i}", "answer": i} for i in range(4)]
    fake = types.SimpleNamespace(load_dataset=lambda hub_id, config=None, split=None: records)
    monkeypatch.setitem(sys.modules, "datasets", fake)
    rows = load_source("aime2025", split="test", limit=2)
    assert [(r["id"], r["answers"]) for r in rows] == [("aime2025-0", ["0"]), ("aime2025-1", ["1"])]
    assert hub.SOURCES["aime2025"].hub_split == "train"
