"""JSONL IO: round trips, atomic writes, and one-line errors that name file and line."""

from __future__ import annotations

import re

import pytest

from drmas.data.io import PREPARED_FIELDS, read_jsonl, validate_prepared, write_jsonl
from drmas.errors import DataError


def _row(i: int, **over) -> dict:
    row = {"id": f"s-{i}", "data_source": "s", "question": f"q{i}?", "answers": [str(i)],
           "split": "test"}
    row.update(over)
    return row


def test_round_trip_creates_parents(tmp_path):
    path = tmp_path / "a" / "b" / "rows.jsonl"
    rows = [_row(0), _row(1, question="ünïcode \\frac{1}{2}\nnewline")]
    write_jsonl(path, rows)
    assert read_jsonl(path, required=PREPARED_FIELDS) == rows
    assert [p.name for p in path.parent.iterdir()] == ["rows.jsonl"]  # no temp file left


def test_write_is_atomic_when_a_row_fails(tmp_path):
    path = tmp_path / "rows.jsonl"
    write_jsonl(path, [_row(0)])
    with pytest.raises(TypeError):
        write_jsonl(path, [_row(1), {"bad": object()}])
    assert read_jsonl(path) == [_row(0)]  # the old file is intact
    assert [p.name for p in tmp_path.iterdir()] == ["rows.jsonl"]


def test_blank_lines_are_skipped(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n\n   \n{"a": 2}\n', encoding="utf-8")
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}]


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match="nope.jsonl: file not found"):
        read_jsonl(tmp_path / "nope.jsonl")


@pytest.mark.parametrize("text, message", [
    ('{"a": 1}\n{"a": 2,}\n', r":2: not valid JSON \("),
    ('{"a": 1}\n{"a": 2}\n[1, 2]\n', r":3: expected a JSON object, got list"),
    ('{"a": 1}\n{"b": 2}\n', r":2: missing field\(s\) a"),
])
def test_bad_lines_name_file_and_line(tmp_path, text, message):
    path = tmp_path / "rows.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataError, match=re.escape(str(path)) + message) as info:
        read_jsonl(path, required=("a",))
    assert "\n" not in str(info.value)


def test_not_utf8(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'{"a": "\xff"}\n')
    with pytest.raises(DataError, match="not UTF-8"):
        read_jsonl(path)


def test_validate_prepared_accepts_good_rows():
    validate_prepared([_row(0), _row(1, answers=["a", "b"])], "x.jsonl")


@pytest.mark.parametrize("bad, message", [
    ({"answers": "5"}, "answers must be a non-empty list"),
    ({"answers": []}, "answers must be a non-empty list"),
    ({"answers": [5]}, "answers must be a non-empty list"),
    ({"answers": [""]}, "answers must be a non-empty list"),
    ({"question": ""}, "question must be a non-empty string"),
    ({"id": 3}, "id must be a non-empty string"),
    ({"id": "s-0"}, r"duplicate id 's-0' \(first at line 1\)"),
])
def test_validate_prepared_errors_name_the_line(bad, message):
    rows = [_row(0), _row(1), _row(2, **bad)]
    with pytest.raises(DataError, match=r"out/test.jsonl:3: " + message) as info:
        validate_prepared(rows, "out/test.jsonl")
    assert "\n" not in str(info.value)


def test_validate_prepared_missing_field():
    row = _row(0)
    del row["split"]
    with pytest.raises(DataError, match=r"f.jsonl:1: missing field\(s\) split"):
        validate_prepared([row], "f.jsonl")


def test_read_json_value_reads_any_value_within_bounds(tmp_path):
    """Local dataset files may hold a JSON array: read whole, but only from a regular file."""
    import os

    from drmas.data.io import read_json_value

    (tmp_path / "rows.json").write_text('[{"question": "q", "answer": "a"}]')
    assert read_json_value(tmp_path / "rows.json") == [{"question": "q", "answer": "a"}]
    os.mkfifo(tmp_path / "pipe.json")
    with pytest.raises(DataError, match="is a FIFO, not a regular file"):
        read_json_value(tmp_path / "pipe.json", what="dataset file")
    (tmp_path / "bad.json").write_text("[1,")
    with pytest.raises(DataError, match=r"bad\.json:1: not valid JSON"):
        read_json_value(tmp_path / "bad.json")
