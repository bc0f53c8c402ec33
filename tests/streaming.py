"""Run a long command from a slow test and show its progress on the terminal as it goes
(pytest captures output, so a 10-minute workflow would otherwise print nothing)."""

from __future__ import annotations

import subprocess
import time

# what is worth relaying: Snakemake's "N of M steps" and the drmas watcher's table
KEEP = ("steps (", "drmas:", "train ", "warmstart ", "eval ", "Error", "error")


def run(cmd, cwd, env, capsys, timeout: float, label: str = "") -> subprocess.CompletedProcess:
    """Like subprocess.run(capture_output=True, text=True), relaying progress lines."""
    start = time.time()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1)
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if any(k in line for k in KEEP):
                with capsys.disabled():
                    print(f"  [{label} {time.time() - start:5.0f}s] {line.rstrip()}", flush=True)
            if time.time() - start > timeout:
                proc.kill()
                raise subprocess.TimeoutExpired(cmd, timeout)
        proc.wait(timeout=max(1.0, timeout - (time.time() - start)))
    finally:
        if proc.poll() is None:
            proc.kill()
    out = "".join(lines)
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout=out, stderr=out)
