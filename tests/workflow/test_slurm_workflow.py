"""The SLURM profile run for real: `snakemake --profile profiles/slurm` on a reduced default
config (math suite) against a running SLURM cluster (on one machine:
`sudo bash profiles/slurm/single-machine.sh`, which `.ci/run` does), with one training job
cancelled (`scancel`) once it has written a checkpoint. Snakemake resubmits it (the profile's
`retries: 1`), it resumes from that checkpoint, and the workflow ends with tables
byte-identical to a local run's; `sacct` shows every job but the final `all` as a SLURM job.
Marked `cluster` (`pytest -m cluster`): it needs the cluster and the `cluster` extra
(snakemake-executor-plugin-slurm)."""

import collections
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from repo import REPO, snakemake, snakemake_bin, workflow_env
from workflows import REDUCED, comparable_tables, first_checkpointed_run, reduced_workflow

PROFILE = REDUCED["profile"]
CONFIG = {**REDUCED, "suites": ["math"]}
RUNS = f"results/{PROFILE}/runs"
ACCOUNT, PARTITION = "drmas", "debug"           # what single-machine.sh sets up
SLURM = ["--profile", str(REPO / "profiles" / "slurm"), "--configfile", f"config/{PROFILE}.yaml",
         "--default-resources", f"slurm_account={ACCOUNT}", f"slurm_partition={PARTITION}",
         "--slurm-init-seconds-before-status-checks", "5"]


def slurm(*args: str) -> str:
    """A SLURM command's stdout (it must succeed)."""
    return subprocess.run(args, capture_output=True, text=True, check=True, timeout=60).stdout


@pytest.fixture(scope="module")
def cluster():
    """A running SLURM cluster with the test account, or a failure that says how to get one."""
    why = None
    if shutil.which("sbatch") is None:
        why = "no sbatch on PATH"
    elif subprocess.run(["scontrol", "ping"], capture_output=True, text=True).returncode != 0:
        why = "slurmctld does not answer `scontrol ping`"
    else:
        try:
            import snakemake_executor_plugin_slurm  # noqa: F401
        except ImportError:
            why = "no SLURM executor: pip install -e '.[cluster]'"
    if why:
        pytest.fail(f"SLURM is not ready ({why}); start one on this machine with "
                    "`sudo bash profiles/slurm/single-machine.sh`")


def planned_jobs(root: Path) -> collections.Counter:
    """{rule: jobs} that a dry run of the workflow in `root` plans (Snakemake's job stats)."""
    proc = snakemake(root, "--dry-run", "--configfile", f"config/{PROFILE}.yaml", env=workflow_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = proc.stdout.split("Job stats:", 1)[1].split("total", 1)[0]
    return collections.Counter({m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", stats, re.M)})


def cancel_at_first_checkpoint(root: Path, proc: subprocess.Popen, timeout=900) -> tuple[str, Path]:
    """Wait until a training run of the workflow in `root` has a complete checkpoint, then
    `scancel` its SLURM job; returns (the job's comment, the run's folder)."""
    run = first_checkpointed_run(root, proc, timeout)
    suite, assignment, method, seed = run.parts
    comment = f"rule_train_wildcards_{suite}_{assignment}_{method}_{seed.removeprefix('seed')}"
    jobs = [line.split("|") for line in slurm("squeue", "-h", "-o", "%i|%k|%Z").splitlines()]
    ids = [job for job, com, workdir in jobs if com == comment and Path(workdir) == root]
    assert len(ids) == 1, f"no single running SLURM job for {comment}: {jobs}"
    slurm("scancel", ids[0])
    return comment, root / RUNS / run


def accounting(root: Path, since: str, expected: int, timeout=60) -> list[dict]:
    """sacct's records of the jobs that ran in `root` since `since` (waiting for the
    accounting database to hold at least `expected` of them)."""
    deadline = time.time() + timeout
    while True:
        out = slurm("sacct", "-X", "-n", "-P", "--starttime", since,
                    "--format=JobID,Comment,State,Account,Partition,WorkDir")
        rows = [dict(zip(("id", "comment", "state", "account", "partition", "workdir"), l.split("|")))
                for l in out.splitlines()]
        rows = [{**r, "state": r["state"].split()[0]} for r in rows    # "CANCELLED by 0"
                if Path(r["workdir"]) == root]
        if len(rows) >= expected or time.time() > deadline:
            return rows
        time.sleep(1)


@pytest.mark.cluster
def test_slurm_workflow_survives_a_cancelled_job(cluster, tmp_path, capsys):
    env = workflow_env()
    local = reduced_workflow(tmp_path / "local", CONFIG)
    proc = snakemake(local, "--cores", "2", "--configfile", f"config/{PROFILE}.yaml", env=env,
                     timeout=1800, capsys=capsys, label="local")
    assert proc.returncode == 0, proc.stderr[-4000:]

    root = reduced_workflow(tmp_path / "slurm", CONFIG).resolve()
    plan = planned_jobs(root)
    assert plan["train"] == 6 and plan["all"] == 1
    since = time.strftime("%Y-%m-%dT%H:%M:%S")
    run = subprocess.Popen([snakemake_bin(), *SLURM], cwd=root, env=env, text=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        cancelled, run_dir = cancel_at_first_checkpoint(root, run)
        _, err = run.communicate(timeout=1200)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGTERM)
            run.wait()
    assert run.returncode == 0, err[-4000:]
    assert comparable_tables(root) == comparable_tables(local)

    # Every job but the local `all` ran as a SLURM job, with the test account and partition;
    # the cancelled one shows as CANCELLED and again, resubmitted, as COMPLETED.
    jobs = accounting(root, since, expected=sum(plan.values()))   # all jobs - `all` + 1 resubmitted
    done = collections.Counter(r["comment"].split("_wildcards_")[0].removeprefix("rule_")
                               for r in jobs if r["state"] == "COMPLETED")
    assert done == plan - collections.Counter({"all": 1}), jobs
    assert [r["comment"] for r in jobs if r["state"] != "COMPLETED"] == [cancelled], jobs
    assert [r["state"] for r in jobs if r["comment"] == cancelled] == ["CANCELLED", "COMPLETED"]
    assert {(r["account"], r["partition"]) for r in jobs} == {(ACCOUNT, PARTITION)}
    summary = yaml.safe_load((run_dir / "summary.json").read_text())
    assert summary["resumed_from"] is not None and summary["resumed_from"] >= 1
