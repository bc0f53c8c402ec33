"""Progress bars that also report to the terminal running the workflow.

Every long job (warm start, RL run, evaluation) shows a tqdm bar in its log file. A job's log
is not where its user looks, so each bar also writes a small status file (what, step, total,
rate) into `$DRMAS_STATUS_DIR` when that variable is set; the Snakefile sets it and starts a
watcher (`drmas/status/watch.py`) that prints the running jobs' progress to the terminal at least
once a minute. Outside the workflow nothing but the bar is written.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from tqdm import tqdm

STATUS_ENV = "DRMAS_STATUS_DIR"


class Bar(tqdm):
    """tqdm plus a status file, rewritten at most every `status_every` seconds."""

    def __init__(self, *args, job: str | None = None, status_every: float = 5.0, **kwargs):
        super().__init__(*args, **kwargs)
        folder = os.environ.get(STATUS_ENV)
        self._status = None
        if folder:
            self._status = Path(folder) / f"{socket.gethostname()}-{os.getpid()}-{id(self):x}.json"
            self._status.parent.mkdir(parents=True, exist_ok=True)
        self._job = job or str(self.desc)
        self._every, self._last = status_every, 0.0
        self._write(force=True)

    def _write(self, force: bool = False, done: bool = False) -> None:
        if self._status is None:
            return
        now = time.time()
        if not (force or done or now - self._last >= self._every):
            return
        self._last = now
        info = {"job": self._job, "n": self.n, "initial": self.initial, "total": self.total,
                "started": self.start_t,
                "elapsed": self.format_dict.get("elapsed", 0.0), "updated": now,
                "host": socket.gethostname(), "pid": os.getpid(), "done": done,
                "postfix": self.postfix or ""}
        tmp = self._status.with_suffix(".tmp")
        tmp.write_text(json.dumps(info))
        tmp.replace(self._status)

    def __iter__(self):
        # tqdm's own iteration updates its count inline (not through `update`); it syncs
        # `self.n` whenever it redraws, which is when the status is worth rewriting
        for item in super().__iter__():
            yield item
            self._write()

    def update(self, n: float = 1):
        out = super().update(n)
        self._write()
        return out

    def close(self) -> None:
        if not getattr(self, "_closed_status", False) and getattr(self, "_status", None) is not None:
            self._closed_status = True
            self._write(done=True)
        super().close()


def bar(*args, job: str | None = None, **kwargs) -> Bar:
    """A progress bar (tqdm's arguments) that reports to the workflow's watcher as `job`."""
    return Bar(*args, job=job, **kwargs)
