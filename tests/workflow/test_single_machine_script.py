"""profiles/slurm/single-machine.sh stops only the daemons it started (their pids in its pid
folder) and refuses to start beside a SLURM, munge or MariaDB daemon it did not start. No
daemon runs here: stand-ins are copies of `sleep` named like the daemons (their
/proc/<pid>/comm is the name), and a `pkill` on PATH records any call."""

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from repo import REPO

SCRIPT = REPO / "profiles" / "slurm" / "single-machine.sh"


def test_the_script_parses():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


@pytest.fixture
def fake(tmp_path):
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "pkill").write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path}/pkill.calls\n")
    (bin_ / "pkill").chmod(0o755)
    procs = []

    def start(name):
        exe = tmp_path / "exe" / name
        exe.parent.mkdir(exist_ok=True)
        if not exe.exists():
            shutil.copy(shutil.which("sleep"), exe)
        proc = subprocess.Popen([str(exe), "60"])
        procs.append(proc)
        for _ in range(50):                      # until the exec has renamed it
            if open(f"/proc/{proc.pid}/comm").read().strip() == name:
                break
            time.sleep(0.02)
        return proc

    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}",
           "DRMAS_SLURM_PIDDIR": str(tmp_path / "pids")}
    yield start, env, tmp_path
    for proc in procs:
        proc.kill()
        proc.wait()


def test_stop_signals_only_its_own_pids(fake):
    start, env, tmp = fake
    mine, foreign = start("slurmd"), start("slurmd")
    db = start("mariadbd")                           # a database it did not start
    (tmp / "pids").mkdir()
    (tmp / "pids" / "slurmd.pid").write_text(f"{mine.pid}\n")
    (tmp / "pids" / "munged.pid").write_text(f"{foreign.pid}\n")   # a pid reused by another daemon
    out = subprocess.run(["bash", str(SCRIPT), "stop"], env=env, capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    assert mine.wait(timeout=10) is not None         # stopped
    assert foreign.poll() is None and db.poll() is None
    assert not (tmp / "pkill.calls").exists()
    assert not list((tmp / "pids").iterdir())


def test_start_refuses_beside_a_foreign_daemon(fake):
    start, env, tmp = fake
    foreign = start("slurmctld")
    out = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 1
    # the first foreign daemon it finds is named: the fake one, or a real cluster's already
    # running on this machine (CI starts one before its last test run), which is foreign too
    found = re.fullmatch(r"single-machine SLURM: error: a (\w+) this script did not start is "
                         r"running \(pid (\d+)\): this machine has its own SLURM or database; "
                         r"stop it, or use that cluster instead", out.stderr.strip())
    assert found, out.stderr
    name, pid = found[1], int(found[2])
    assert (name, pid) == ("slurmctld", foreign.pid) or (
        Path(f"/proc/{pid}/comm").read_text().strip() == name and pid != foreign.pid)
    assert foreign.poll() is None and not (tmp / "pkill.calls").exists()
