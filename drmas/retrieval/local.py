"""A private retrieval service in a child process, for training and evaluation.

The trainer process runs Ray (and torch.distributed); `ray.init` installs its own SIGSEGV
handler, while a JVM (pyserini) in the same process uses SIGSEGV internally, so the two must
not share a process. `LocalService` starts `drmas serve` on a free loopback port as a child
(which dies with its parent) and talks to it through the ordinary `RetrievalClient`.
"""

from __future__ import annotations

import ctypes
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from drmas.errors import DrmasError
from drmas.net import free_port
from drmas.retrieval.client import RetrievalClient
from drmas.retrieval.searcher import Hit


def _die_with_parent() -> None:
    """Linux: the child gets SIGTERM when its parent dies (even by SIGKILL)."""
    try:
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class LocalService:
    """`drmas serve --index DIR` as a child process; `batch_search` like a BM25Searcher.

    `jvm_heap` caps the child's Java heap; `threads` is its search threads per engine call;
    `deadline_s` bounds each batch (retries included)."""

    def __init__(self, index_dir: str | Path, startup_timeout_s: float = 180.0,
                 jvm_heap: str = "1g", threads: int = 1, deadline_s: float = 300.0):
        port = free_port()
        self._log = tempfile.TemporaryFile()
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "drmas.cli", "serve", "--index", str(index_dir),
             "--host", "127.0.0.1", "--port", str(port), "--jvm-heap", str(jvm_heap),
             "--threads", str(int(threads))],
            stdout=self._log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        self.client = RetrievalClient(f"http://127.0.0.1:{port}", timeout_s=120,
                                      deadline_s=deadline_s)
        self._wait_ready(startup_timeout_s)

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        # one quick attempt per probe: the service is still loading
        with RetrievalClient(self.client.url, timeout_s=5, retries=0, deadline_s=5) as probe:
            while time.monotonic() < deadline:
                if self._proc.poll() is not None:
                    self._log.seek(0)
                    tail = self._log.read().decode(errors="replace").strip().splitlines()[-1:]
                    raise DrmasError("retrieval service exited at start: "
                                     f"{' '.join(tail) or self._proc.returncode}")
                try:
                    probe.health()
                    return
                except DrmasError:
                    time.sleep(0.5)
        self.close()
        raise DrmasError(f"retrieval service did not answer within {timeout_s:.0f} s")

    def batch_search(self, queries: list[str], k: int = 3) -> list[list[Hit]]:
        return self.client.batch_search(queries, k)

    def close(self) -> None:
        self.client.close()
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        self._log.close()

    def __enter__(self) -> "LocalService":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_proc", None) is not None and self._proc.poll() is None:
            self._proc.terminate()
