"""An interrupted workflow loses nothing: `snakemake --cores 2` on a reduced default config
(math suite) is SIGKILLed, whole process group, once its first RL run has written a
checkpoint; rerun (`--unlock`, then `--rerun-incomplete`, as Snakemake asks after a kill), it
ends with tables byte-identical to those of an uninterrupted run in a fresh copy. Slow: two
workflow runs (`pytest -m slow`)."""

import os
import signal
import subprocess
from pathlib import Path

import pytest
import yaml

from repo import snakemake, snakemake_bin, workflow_env
from workflows import (REDUCED, comparable_tables as tables, first_checkpointed_run,
                       reduced_workflow, start_workflow)

# Today's workflow layout, in one place (the workflow may move folders: adapt here).
PROFILE = REDUCED["profile"]
TABLES = f"results/{PROFILE}/tables"
RUNS = f"results/{PROFILE}/runs"
SUMMARY = "summary.json"                                   # in a run folder, written last

CONFIG = {**REDUCED, "suites": ["math"]}
PROFILE_ARGS = ["--configfile", f"config/{PROFILE}.yaml"]
SNAKEMAKE = [snakemake_bin(), *PROFILE_ARGS]
ENV = workflow_env()


def snakemake_ok(root: Path, *args, capsys=None, timeout=2400) -> subprocess.CompletedProcess:
    """Snakemake on CONFIG's profile in `root`, which must succeed; long runs (`capsys`) show
    their progress on the terminal."""
    proc = snakemake(root, *PROFILE_ARGS, *args, env=ENV, timeout=timeout, capsys=capsys,
                     label=root.name)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


def descendants(pid: int) -> set[int]:
    """Every live process below `pid` (from /proc), to make sure none outlives the kill."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def kill_at_first_checkpoint(root: Path, timeout=1500) -> Path:
    """Start the workflow in its own process group; SIGKILL the group as soon as an RL run
    has a complete checkpoint (`first_checkpointed_run`). Returns that run's folder."""
    log = root.parent / f"{root.name}.snakemake.log"
    proc = start_workflow(root, [*SNAKEMAKE, "--cores", "2"], ENV, log)
    run = root / RUNS / first_checkpointed_run(root, proc, timeout, log)
    below = descendants(proc.pid)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    for pid in below:            # a job that left the group (none expected) goes too
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return run


@pytest.mark.slow
def test_killed_workflow_rerun_gives_the_uninterrupted_tables(tmp_path, capsys):
    reference = reduced_workflow(tmp_path / "reference", CONFIG)
    snakemake_ok(reference, "--cores", "2", capsys=capsys)
    expected = tables(reference)
    assert {"math.csv", "math.md", "math.tex"} <= set(expected)

    interrupted = reduced_workflow(tmp_path / "interrupted", CONFIG)
    run = kill_at_first_checkpoint(interrupted)
    assert not (run / SUMMARY).exists(), "the run finished before the kill"
    assert not (interrupted / TABLES).exists()

    snakemake_ok(interrupted, "--unlock")
    snakemake_ok(interrupted, "--cores", "2", "--rerun-incomplete", capsys=capsys)
    assert tables(interrupted) == expected
    summary = yaml.safe_load((run / SUMMARY).read_text())
    assert summary["resumed_from"] is not None and summary["resumed_from"] >= 1
