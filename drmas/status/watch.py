"""Live progress of a running workflow: which jobs run, their step out of total, an ETA.

Jobs report through status files (`drmas/status/progress.py`); this module reads them. The
Snakefile starts `Watcher` when a run begins, so the terminal of `snakemake --cores all`
shows a progress table at least once a minute; `drmas watch results/<profile>` shows the same
table live from another terminal (or after the fact, for a run started elsewhere).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from drmas.errors import DrmasError

STALE_S = 900.0          # a status not updated for this long is a job that died


def status_dir(results: str | Path) -> Path:
    return Path(results) / ".status"


def _alive(info: dict) -> bool:
    if info.get("host") != socket.gethostname():
        return True                         # another node: trust the update time alone
    try:
        os.kill(int(info["pid"]), 0)
    except (ProcessLookupError, ValueError, KeyError):
        return False
    except PermissionError:
        return True
    return True


#: the largest status file read (a job writes a few hundred bytes)
MAX_STATUS_BYTES = 1 << 20


def running(folder: str | Path, now: float | None = None) -> list[dict]:
    """Status of every job still running, oldest first."""
    now = time.time() if now is None else now
    out = []
    for path in Path(folder).glob("*.json"):
        try:
            # a job's status file is a few hundred bytes: anything else (a FIFO, a device, a
            # large file) is not one, and is skipped without being read
            if not path.is_file() or path.stat().st_size > MAX_STATUS_BYTES:
                continue
            info = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError, UnicodeDecodeError):
            continue                        # being replaced right now
        if not isinstance(info, dict):
            continue
        if info.get("done") or now - info.get("updated", 0) > STALE_S or not _alive(info):
            continue
        out.append(info)
    return sorted(out, key=lambda i: i.get("started", 0))


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def eta_s(info: dict) -> float | None:
    n, total, elapsed = info.get("n") or 0, info.get("total"), info.get("elapsed") or 0.0
    done_here = n - (info.get("initial") or 0)          # steps made since this job started
    if not total or done_here <= 0:
        return None
    return elapsed / done_here * (total - n)


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def table(jobs: list[dict]) -> Table:
    t = Table(title=f"drmas: {len(jobs)} job(s) running at {time.strftime('%H:%M:%S')}",
              title_justify="left", show_edge=False, pad_edge=False)
    for col, just in (("job", "left"), ("step", "right"), ("%", "right"), ("elapsed", "right"),
                      ("ETA", "right"), ("", "left")):
        t.add_column(col, justify=just)
    for info in jobs:
        n, total = int(info.get("n") or 0), info.get("total")
        pct = f"{100 * n / total:.0f}" if total else ""
        wall = time.time() - info["started"] if info.get("started") else info.get("elapsed")
        t.add_row(info["job"], f"{n}/{total or '?'}", pct, _clock(wall),
                  _clock(eta_s(info)), str(info.get("postfix", ""))[:40])
    return t


class Watcher:
    """A daemon thread that prints the running jobs every `interval` seconds (nothing when
    nothing runs) to the terminal's stderr, until `stop`."""

    def __init__(self, folder: str | Path, interval: float = 30.0, console: Console | None = None):
        self.folder, self.interval = Path(folder), interval
        self.console = console or Console(stderr=True, width=120)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="drmas-watch", daemon=True)

    def start(self) -> "Watcher":
        """Clear what an earlier run left in the status folder, then watch it."""
        self.folder.mkdir(parents=True, exist_ok=True)
        for stale in self.folder.glob("*.json"):
            stale.unlink(missing_ok=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            jobs = running(self.folder)
            if jobs:
                self.console.print(table(jobs))
            else:
                done = sum(1 for p in self.folder.glob("*.json") if '"done": true' in _read(p))
                self.console.print(f"drmas: {time.strftime('%H:%M:%S')} no progress bar running "
                                   f"(jobs starting or between stages; {done} finished)")

    def stop(self) -> None:
        self._stop.set()


def watch(results: str | Path, interval: float = 2.0, once: bool = False) -> None:
    """`drmas watch`: a live table of the jobs of a run (Ctrl-C to leave)."""
    from rich.live import Live

    if not Path(results).is_dir():
        raise DrmasError(f"{results}: no results folder (give the profile's results/<profile>, "
                         "which the workflow creates when it starts)")
    folder = status_dir(results)
    console = Console()
    if once:
        console.print(table(running(folder)))
        return
    with Live(table(running(folder)), console=console, refresh_per_second=1) as live:
        try:
            while True:
                time.sleep(interval)
                live.update(table(running(folder)))
        except KeyboardInterrupt:
            pass
