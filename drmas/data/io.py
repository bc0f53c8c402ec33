"""JSONL, JSON and YAML reading and writing with errors a user can act on.

Every prepared dataset, rollout dump and eval sample file is JSONL. A broken line should say
which file and which line, in one line of text, not raise a JSONDecodeError traceback from
deep inside a training run; a half-written file (a killed job) should never look finished,
so writes go to a temporary file that is renamed into place. The commands that compute
(`drmas train`, `evaluate`, `warmstart`) check their rows with `read_prepared` before any
model is built, so a bad row costs a second, not a partial run.
"""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Sequence

import yaml

from drmas.errors import ConfigError, DataError

PREPARED_FIELDS = ("id", "data_source", "question", "answers", "split")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


@contextmanager
def reading(path, what: str = "file", error: type[Exception] = DataError):
    """Turn the OS and decoding errors of reading `path` inside the block into one `error`
    line that names the file: not found, a folder, not UTF-8, unreadable (gzip's errors too)."""
    try:
        yield
    except FileNotFoundError:
        raise error(f"{path}: {what} not found") from None
    except IsADirectoryError:
        raise error(f"{path}: is a folder, not a {what}") from None
    except UnicodeDecodeError as exc:
        raise error(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except (OSError, EOFError) as exc:            # gzip.BadGzipFile is an OSError
        detail = getattr(exc, "strerror", None) or exc
        raise error(f"{path}: cannot read ({_one_line(detail)[:200]})") from None


def read_jsonl(path, required: Sequence[str] = ()) -> list[dict]:
    """All rows of a JSONL file (blank lines skipped); each must be an object with `required`."""
    return [row for _, row in _numbered_rows(path, required)]


def _numbered_rows(path, required: Sequence[str] = ()) -> list[tuple[int, dict]]:
    """(line number, row) for every non-blank line of a JSONL file."""
    path = Path(path)
    with reading(path), path.open(encoding="utf-8") as handle:
        return [(lineno, parse_line(line, f"{path}:{lineno}", required))
                for lineno, line in enumerate(handle, start=1) if line.strip()]


def read_prepared(path) -> list[dict]:
    """The rows of a prepared train/test file, checked against the prepared-row contract
    (`validate_prepared`: fields, types, unique ids) and non-empty; errors name file:line."""
    numbered = _numbered_rows(path)
    if not numbered:
        raise DataError(f"{path}: no rows (the file is empty)")
    rows = [row for _, row in numbered]
    validate_prepared(rows, path, [lineno for lineno, _ in numbered])
    return rows


def read_json(path, required: Sequence[str] = (), what: str = "JSON file") -> dict:
    """A JSON object from `path`, with the keys `required`; DataError naming the file else."""
    path = Path(path)
    text = _read_text(path, what)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    return _object(value, str(path), required, f"not a {what}: missing key(s)")


def read_yaml(path, what: str = "YAML file") -> Any:
    """The YAML document in `path`; a syntax error is one ConfigError line naming
    file:line:column and the problem (for config, benchmark and run YAML files alike)."""
    path = Path(path)
    text = _read_text(path, what, error=ConfigError)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{where}: not valid YAML ({_one_line(problem)})") from None


def _read_text(path: Path, what: str, error=DataError) -> str:
    with reading(path, what, error):
        return path.read_text(encoding="utf-8")


def parse_line(line: str, where: str, required: Sequence[str] = ()) -> dict:
    """One JSONL line as a dict; DataError naming `where` (file:line) when it is not one."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DataError(f"{where}: not valid JSON ({exc.msg}, column {exc.colno})") from None
    return _object(row, where, required, "missing field(s)")


def _object(value, where: str, required: Sequence[str], missing_text: str) -> dict:
    """`value` if it is a JSON object with the keys `required`; DataError naming `where`."""
    if not isinstance(value, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(value).__name__}")
    missing = [k for k in required if k not in value]
    if missing:
        raise DataError(f"{where}: {missing_text} {', '.join(missing)}")
    return value


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


def validate_prepared(rows: Sequence[dict], path, linenos: Sequence[int] | None = None) -> None:
    """Check the prepared-row contract; errors name the file and the (1-based) line, which is
    `linenos[i]` for row i when given (a file with blank lines), else i + 1."""
    first_line: dict[str, int] = {}
    for i, row in enumerate(rows):
        lineno = linenos[i] if linenos is not None else i + 1
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
