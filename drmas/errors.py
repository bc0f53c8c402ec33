"""User-facing errors.

Anything a user can cause (a bad config value, an unknown name, a malformed data file) is
raised as a `DrmasError`; the CLI prints its message on one line and exits with status 2,
never with a traceback. Internal bugs stay ordinary exceptions: the CLI keeps their traceback
in a log file (`log_unexpected`) and prints one line pointing to it (exit status 1).
The environment is the user's too: a file-system OSError (a full disk, a read-only or missing
folder, a permission) is one line naming the path and the cause, exit status 2
(`environment_line`).
"""

import errno as _errno

# the OSErrors the file system (not a bug) causes; any other OSError is unexpected
FILE_SYSTEM_ERRNOS = frozenset(getattr(_errno, name) for name in (
    "ENOSPC", "EDQUOT", "EFBIG", "EROFS", "EACCES", "EPERM", "ENOENT", "ENOTDIR", "EISDIR",
    "EEXIST", "ENOTEMPTY", "ENAMETOOLONG", "ELOOP", "EMLINK", "EXDEV", "ETXTBSY", "EBUSY",
    "EIO", "ESTALE") if hasattr(_errno, name))
# those that only a write can meet
_WRITE_ERRNOS = frozenset(getattr(_errno, name) for name in ("ENOSPC", "EDQUOT", "EFBIG", "EROFS")
                          if hasattr(_errno, name))


class DrmasError(Exception):
    """An error the user can fix; its message is shown as is, on one line."""


class ConfigError(DrmasError):
    """The configuration is invalid (wrong type, out of range, unknown name)."""


class DataError(DrmasError):
    """An input data file is missing or malformed."""


def environment_line(exc: BaseException, out=None) -> str | None:
    """`cannot write PATH: CAUSE` (or `cannot access`, when it may have been a read) for an
    OSError of the file system, or None for any other exception. PATH is the error's file
    name (the atomic writers of `drmas.data.io` put the final path there, not their
    temporary), else `out` (the command's `--out`) when known."""
    if not isinstance(exc, OSError) or exc.errno not in FILE_SYSTEM_ERRNOS:
        return None
    import os

    cause = exc.strerror or os.strerror(exc.errno)
    path = exc.filename if isinstance(exc.filename, (str, bytes, os.PathLike)) else out
    action = getattr(exc, "drmas_action", None) or (
        "write" if exc.errno in _WRITE_ERRNOS else "access")
    if path is None:
        return f"cannot {action} files: {cause}"
    return " ".join(f"cannot {action} {os.fsdecode(path)}: {cause}".split())


def log_unexpected(command: str, exc: BaseException, out: str | None = None) -> str:
    """Write the full traceback of an unexpected error to a log file; return the one line to
    print: the exception's last line and the log's path.

    The log goes beside the job's output (`<out>.error.log`) when the command has an `--out`:
    that is on the results tree the user is already looking at, and it survives the job
    (Snakemake deletes a failed job's outputs, so not inside them; a cluster node's temporary
    folder vanishes with the job). Without `--out`, or when that folder cannot be written, it
    goes to `$TMPDIR/drmas-<command>-<time>-<pid>.log`.
    """
    import os
    import tempfile
    import time
    import traceback
    from pathlib import Path

    text = "".join(traceback.format_exception(exc))
    stamp = time.strftime("%Y%m%d-%H%M%S")
    candidates = []
    if out:
        out_path = Path(out).resolve()
        candidates.append(out_path.with_name(out_path.name + ".error.log"))
    candidates.append(Path(tempfile.gettempdir()) / f"drmas-{command}-{stamp}-{os.getpid()}.log")
    log = None
    for path in candidates:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"drmas {command} at {stamp}\n{text}")
            log = path
            break
        except OSError:
            continue
    last = " ".join("".join(traceback.format_exception_only(exc)).split()) or type(exc).__name__
    where = f"full traceback in {log}" if log else "no log could be written"
    return f"unexpected error: {last[:500]} ({where})"
