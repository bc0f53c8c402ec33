"""JSONL, JSON and YAML reading and writing with errors a user can act on.

Every prepared dataset, rollout dump and eval sample file is JSONL. A broken line should say
which file and which line, in one line of text, not raise a JSONDecodeError traceback from
deep inside a training run; a half-written file (a killed job) should never look finished,
so writes go to a temporary file that is renamed into place (`atomic_path`, `atomic_dir`:
every file and folder drmas writes as a result goes through them). The commands that compute
(`drmas train`, `evaluate`, `warmstart`) check their rows with `read_prepared` before any
model is built, so a bad row costs a second, not a partial run.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import yaml

from drmas.data.bounded_yaml import load_bounded
from drmas.errors import FILE_SYSTEM_ERRNOS, ConfigError, DataError

PREPARED_FIELDS = ("id", "data_source", "question", "answers", "split")
#: bounds of a read: a JSON document (scores.json, a run's summary; a local dataset given as
#: one JSON array) and one JSONL line (a sample with its turns, a corpus passage) are far
#: smaller; a path at /dev/zero or a FIFO is refused before it is opened (`regular_file`)
MAX_JSON_BYTES = 512 * 2**20
#: a gold answer that is one of these (any case, any sign) came from a NaN or an infinity
NONFINITE_TEXT = ("nan", "inf", "infinity")
MAX_LINE_BYTES = 64 * 2**20


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


def regular_file(path, what: str = "file", error: type[Exception] = DataError) -> int:
    """The size of `path` if it is a regular file (a symlink to one is), else one `error`
    line: a FIFO would block the read forever and a device (/dev/zero) never ends. A missing
    file or folder is left to `reading`, which names it as such."""
    import stat

    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return 0
    if stat.S_ISDIR(info.st_mode):
        return 0
    if not stat.S_ISREG(info.st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(info.st_mode) else (
            "a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode) else "a socket")
        raise error(f"{path}: is {kind}, not a regular file ({what})")
    return info.st_size


def read_jsonl(path, required: Sequence[str] = ()) -> list[dict]:
    """All rows of a JSONL file (blank lines skipped); each must be an object with `required`."""
    return [row for _, row in _numbered_rows(path, required)]


def _numbered_rows(path, required: Sequence[str] = ()) -> list[tuple[int, dict]]:
    """(line number, row) for every non-blank line of a JSONL file."""
    path = Path(path)
    regular_file(path, "JSONL")
    rows = []
    with reading(path), path.open(encoding="utf-8") as handle:
        for lineno, line in enumerate(iter(lambda: handle.readline(MAX_LINE_BYTES + 1), ""),
                                      start=1):
            if len(line) > MAX_LINE_BYTES:
                raise DataError(f"{path}:{lineno}: a line over {MAX_LINE_BYTES >> 20} MiB")
            if line.strip():
                rows.append((lineno, parse_line(line, f"{path}:{lineno}", required)))
    return rows


def read_prepared(path) -> list[dict]:
    """The rows of a prepared train/test file, checked against the prepared-row contract
    (`validate_prepared`: fields, types, unique ids) and non-empty; errors name file:line."""
    numbered = _numbered_rows(path)
    if not numbered:
        raise DataError(f"{path}: no rows (the file is empty)")
    rows = [row for _, row in numbered]
    validate_prepared(rows, path, [lineno for lineno, _ in numbered])
    return rows


def read_json_value(path, what: str = "JSON file") -> Any:
    """Any JSON value from `path` (a regular file of at most `MAX_JSON_BYTES`); DataError
    naming the file else."""
    path = Path(path)
    text = _read_text(path, what, limit=MAX_JSON_BYTES)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None


def read_json(path, required: Sequence[str] = (), what: str = "JSON file") -> dict:
    """A JSON object from `path`, with the keys `required`; DataError naming the file else."""
    path = Path(path)
    text = _read_text(path, what, limit=MAX_JSON_BYTES)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    return _object(value, str(path), required, f"not a {what}: missing key(s)")


def read_yaml(path, what: str = "YAML file") -> Any:
    """The YAML document in `path`; a syntax error is one ConfigError line naming
    file:line:column and the problem (for config, benchmark and run YAML files alike), and a
    document too large or with too many aliases is refused (`bounded_yaml`)."""
    path = Path(path)
    text = _read_text(path, what, error=ConfigError)
    try:
        return load_bounded(text, str(path))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{where}: not valid YAML ({_one_line(problem)})") from None


def _read_text(path: Path, what: str, error=DataError, limit: int | None = None) -> str:
    """The text of a regular file (`regular_file`) of at most `limit` bytes (default: a YAML
    document's, `bounded_yaml.MAX_BYTES`, which `load_bounded` checks again)."""
    from drmas.data.bounded_yaml import MAX_BYTES

    size = regular_file(path, what, error)
    if limit is not None and size > limit:
        raise error(f"{path}: over {limit >> 20} MiB; not a {what}")
    with reading(path, what, error), path.open(encoding="utf-8") as handle:
        text = handle.read((MAX_BYTES if limit is None else limit) + 1)
    if limit is not None and len(text) > limit:
        raise error(f"{path}: over {limit >> 20} MiB; not a {what}")
    return text         # YAML: one character over MAX_BYTES at most, refused by load_bounded


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
    """Write rows atomically (`atomic_path`): `path` appears only once every row is written."""
    with atomic_path(path) as tmp:
        dump_jsonl(tmp, rows)


def dump_jsonl(path, rows: Iterable[dict]) -> None:
    """Write rows to `path` as it is (inside an `atomic_path` block: several files written
    all or nothing). A file-system error names `path`, which that block turns into its final
    name, whichever of several blocks it passes through."""
    try:
        with open(path, "w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
    except OSError as exc:
        if exc.filename is None:
            exc.filename = str(path)
        raise


# -- atomic writes ---------------------------------------------------------------------------
# A job killed, or a disk that fills, mid-write must never leave a file or folder under its
# final name that looks finished: Snakemake (and a user rerunning by hand) would take it as
# the output and the next stage would read half a corpus or a model without its weights. So
# everything is written beside its final name under a hidden temporary name in the same
# folder (a rename within one file system is atomic) and renamed into place only when the
# write succeeded; on any error the temporary is removed and whatever was there before is
# left as it was. Nothing is fsynced: these outputs are rebuilt by rerunning their job, and
# what stands for hours of compute (checkpoints, train/checkpoint.py) flushes its own files.
# Temporary files and folders are created with the usual permissions (0666/0777 less the
# umask, as a plain `open` would), not mkstemp's owner-only ones: results trees are shared.

def _sibling(path: Path, suffix: str) -> Path:
    """A hidden name beside `path`, `.<name>.<random><suffix>`, that nothing has yet."""
    while True:
        candidate = path.with_name(f".{path.name}.{secrets.token_hex(4)}{suffix}")
        if not os.path.lexists(candidate):
            return candidate


def _fresh_sibling(path: Path, suffix: str, make) -> Path:
    """A new hidden name beside `path` (`_sibling`), created by `make` (which fails on an
    existing name): two writers of one path (two jobs, a job and a user) never share one."""
    while True:
        try:
            candidate = _sibling(path, suffix)
            make(candidate)
            return candidate
        except FileExistsError:
            continue


def _create_file(path: Path) -> None:
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))


def _remove(path: Path) -> None:
    """Delete a temporary or set-aside file or folder, best effort (never raises)."""
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    except OSError:
        pass


def _blame_final(exc: BaseException, path: Path, tmp: Path | None) -> None:
    """Make a file-system OSError raised while writing `path` through its temporary `tmp`
    name `path` (what the user asked for) instead of the temporary, or name it at all (a
    full disk's write error carries no file name), and mark it as a write: the CLI turns it
    into one line (`errors.environment_line`). A file name outside the temporary (a folder
    that could not be created) is kept: it is the cause."""
    if not isinstance(exc, OSError) or exc.errno not in FILE_SYSTEM_ERRNOS:
        return
    exc.drmas_action = "write"
    if exc.filename is None:
        exc.filename = str(path)
    folder, hidden = str(path.parent.absolute()), f".{path.name}."
    temps = {str(tmp), str(tmp.absolute())} if tmp is not None else set()
    for attr in ("filename", "filename2"):
        name = getattr(exc, attr)
        if not isinstance(name, (str, os.PathLike)):
            continue
        name = os.fspath(name)
        inside = next((t for t in temps if name == t or name.startswith(t + os.sep)), None)
        if inside is not None:
            setattr(exc, attr, str(path) + name[len(inside):])
        elif (os.path.basename(name).startswith(hidden)            # a temporary not made
              and os.path.dirname(os.path.abspath(name)) == folder):
            setattr(exc, attr, str(path))


@contextmanager
def atomic_path(path) -> Iterator[Path]:
    """Yield a temporary path beside `path` (same folder, hidden name, an empty file already
    there) for the block to write; rename it onto `path` when the block succeeds, remove it
    when the block (or the rename) fails, leaving any older `path` as it was. The folder is
    created if missing. The temporary's name ends in `.tmp`: a writer that picks a format
    from the file name (`savefig`, `np.save`) must be told the format.

        with atomic_path(out / "table.csv") as tmp:
            frame.to_csv(tmp)
    """
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = _fresh_sibling(path, ".tmp", _create_file)
        yield tmp
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None:
            _remove(tmp)
        _blame_final(exc, path, tmp)
        raise


def atomic_write_text(path, text: str, encoding: str | None = None) -> None:
    """`Path(path).write_text(text, encoding)`, atomically (`atomic_path`): the same bytes."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding=encoding)


@contextmanager
def atomic_dir(path) -> Iterator[Path]:
    """Yield a fresh, empty folder beside `path` (`.<name>.<random>.partial`) for the block
    to fill (`save_pretrained` writes a model as several files, config.json first, so a
    model folder cut short would look like a model); when the block succeeds it replaces
    `path` (an older folder there is moved aside, then deleted; put back if the last rename
    fails), when it fails it is deleted and an older `path` is left as it was."""
    path = Path(path)
    partial = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = _fresh_sibling(path, ".partial", os.mkdir)
        yield partial
        old = None
        if os.path.lexists(path):
            old = _sibling(path, ".old")
            os.rename(path, old)
        try:
            os.rename(partial, path)
        except BaseException:
            if old is not None:
                os.rename(old, path)
            raise
        if old is not None:
            _remove(old)
    except BaseException as exc:
        if partial is not None:
            _remove(partial)
        _blame_final(exc, path, partial)
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
        bad = next((a for a in answers if a.strip().lower().lstrip("+-") in NONFINITE_TEXT), None)
        if bad is not None:
            raise DataError(f"{where}: gold answer {bad!r} is a non-finite number (a NaN or "
                            "infinity in the source data), not an answer")
        if row["id"] in first_line:
            raise DataError(f"{where}: duplicate id {row['id']!r} "
                            f"(first at line {first_line[row['id']]})")
        first_line[row["id"]] = lineno
