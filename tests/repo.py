"""Where the repository's own files are (profiles, benchmarks, the Snakefile): found from
this file, not from the installed package, so the tests also run against a non-editable
`pip install .`. And how the workflow tests run Snakemake on a copy of them, so that a test's
results/ never touch the checkout's."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import streaming

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = ("Snakefile", "rules", "config", "benchmarks", "envs")    # what a workflow run reads
BIN = Path(sys.executable).parent                     # the venv's scripts: drmas, snakemake


def copy_workflow(dest: Path) -> Path:
    """The workflow's files copied into `dest` (created if needed); returns `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in WORKFLOW:
        src = REPO / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dest / name)
    return dest


def snakemake_bin() -> str:
    """This venv's snakemake (the one that sees this venv's drmas), else the PATH's."""
    exe = BIN / "snakemake"
    return str(exe) if exe.exists() else "snakemake"


def snakemake(workdir, *args, env=None, timeout: float = 300, capsys=None,
              label: str = "") -> subprocess.CompletedProcess:
    """This venv's Snakemake run in `workdir` with `args` (environment `env`, None: this
    process's), its output captured as text; with `capsys`, a long run's progress lines are
    relayed to the terminal as it goes (streaming.run, tagged `label`)."""
    cmd = [snakemake_bin(), *args]
    if capsys is not None:
        return streaming.run(cmd, workdir, env, capsys, timeout, label=label)
    return subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=timeout)


def workflow_env() -> dict:
    """The environment for a Snakemake run: this venv's scripts first on PATH (the rules call
    `drmas`), the progress watcher every 30 s."""
    return dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}",
                DRMAS_WATCH_INTERVAL="30")
