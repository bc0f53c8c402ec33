"""JSONL reading and writing with errors a user can act on.

Every prepared dataset, rollout dump and eval sample file is JSONL. A broken line should say
which file and which line, in one line of text, not raise a JSONDecodeError traceback from
deep inside a training run; a half-written file (a killed job) should never look finished,
so writes go to a temporary file that is renamed into place.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Iterable, Sequence

from drmas.errors import DataError

PREPARED_FIELDS = ("id", "data_source", "question", "answers", "split")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def read_jsonl(path, required: Sequence[str] = ()) -> list[dict]:
    """All rows of a JSONL file (blank lines skipped); each must be an object with `required`."""
    path = Path(path)
    try:
        with path.open(encoding="utf-8") as handle:
            return [parse_line(line, f"{path}:{lineno}", required)
                    for lineno, line in enumerate(handle, start=1) if line.strip()]
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({_one_line(exc.strerror or exc)})") from None


def parse_line(line: str, where: str, required: Sequence[str] = ()) -> dict:
    """One JSONL line as a dict; DataError naming `where` (file:line) when it is not one."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DataError(f"{where}: not valid JSON ({exc.msg}, column {exc.colno})") from None
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(row).__name__}")
    missing = [f for f in required if f not in row]
    if missing:
        raise DataError(f"{where}: missing field(s) {', '.join(missing)}")
    return row


def write_jsonl(path, rows: Iterable[dict]) -> None:
    """Write rows atomically: a temporary file in the same folder, then a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def validate_prepared(rows: Sequence[dict], path) -> None:
    """Check the prepared-row contract; errors name the file and the (1-based) line."""
    first_line: dict[str, int] = {}
    for lineno, row in enumerate(rows, start=1):
        where = f"{path}:{lineno}"
        missing = [f for f in PREPARED_FIELDS if f not in row]
        if missing:
            raise DataError(f"{where}: missing field(s) {', '.join(missing)}")
        for field in ("id", "data_source", "question", "split"):
            if not isinstance(row[field], str) or not row[field]:
                raise DataError(f"{where}: {field} must be a non-empty string, "
                                f"got {row[field]!r:.60}")
        answers = row["answers"]
        if not (isinstance(answers, list) and answers
                and all(isinstance(a, str) and a.strip() for a in answers)):
            raise DataError(f"{where}: answers must be a non-empty list of non-empty strings, "
                            f"got {answers!r:.60}")
        if row["id"] in first_line:
            raise DataError(f"{where}: duplicate id {row['id']!r} "
                            f"(first at line {first_line[row['id']]})")
        first_line[row["id"]] = lineno
