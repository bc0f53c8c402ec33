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
from workflows import (REDUCED, comparable_tables, first_checkpointed_run, log_tails,
                       reduced_workflow, start_workflow, tail)

PROFILE = REDUCED["profile"]
CONFIG = {**REDUCED, "suites": ["math"]}
RUNS = f"results/{PROFILE}/runs"
ACCOUNT, PARTITION = "drmas", "debug"           # what single-machine.sh sets up
SLURM = ["--profile", str(REPO / "profiles" / "slurm"), "--configfile", f"config/{PROFILE}.yaml",
         "--default-resources", f"slurm_account={ACCOUNT}", f"slurm_partition={PARTITION}",
         "--slurm-init-seconds-before-status-checks", "5"]


#: rules the workflow runs on the machine it runs on, never as cluster jobs (`localrule`)
LOCAL_RULES = ("all", "card", "verify")

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


def cancel_at_first_checkpoint(root: Path, proc: subprocess.Popen, log: Path,
                               timeout=900) -> tuple[str, Path]:
    """Wait until a training run of the workflow in `root` (its Snakemake output in `log`)
    has a complete checkpoint, then `scancel` its SLURM job; returns (the job's comment, the
    run's folder)."""
    run = first_checkpointed_run(root, proc, timeout, log, explain=lambda: scheduler_view(root))
    suite, assignment, method, seed = run.parts
    comment = f"rule_train_wildcards_{suite}_{assignment}_{method}_{seed.removeprefix('seed')}"
    jobs = [line.split("|") for line in slurm("squeue", "-h", "-o", "%i|%k|%Z").splitlines()]
    ids = [job for job, com, workdir in jobs if com == comment and Path(workdir) == root]
    assert len(ids) == 1, f"no single running SLURM job for {comment}: {jobs}"
    slurm("scancel", ids[0])
    return comment, root / RUNS / run


def scheduler_view(root: Path) -> str:
    """What SLURM says of the node and of the jobs (with the reason a job waits), and the
    tails of the executor's job logs: why a workflow in `root` made no progress."""
    def out(*cmd: str) -> str:
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
            return proc.stdout + proc.stderr
        except (OSError, subprocess.TimeoutExpired) as err:
            return f"{' '.join(cmd)}: {err}\n"
    return (f"sinfo:\n{out('sinfo', '-N', '-o', '%N %T %c %m %E')}"
            f"squeue:\n{out('squeue', '-o', '%i %T %M %r %k')}"
            f"SLURM daemons' logs:\n{log_tails(Path('/var/log/slurm'), lines=20)}\n"
            f"executor's job logs:\n{log_tails(root / '.snakemake' / 'slurm_logs')}\n")


def end_workflow(proc: subprocess.Popen, root: Path, grace: float = 120) -> None:
    """Stop a Snakemake run that is still going (SIGTERM to its session, SIGKILL after
    `grace` s) and cancel the SLURM jobs it left in `root`, so that a failed test does not
    leave training jobs on the machine's cores for the next one."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    listed = subprocess.run(["squeue", "-h", "-o", "%i|%Z"], capture_output=True, text=True,
                            timeout=60)               # no check: never mask the test's error
    left = [job for job, _, workdir in (l.partition("|") for l in listed.stdout.splitlines())
            if Path(workdir) == root]
    if left:
        subprocess.run(["scancel", *left], capture_output=True, timeout=60)


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
    log = tmp_path / "slurm.snakemake.log"
    run = start_workflow(root, [snakemake_bin(), *SLURM], env, log)
    try:
        cancelled, run_dir = cancel_at_first_checkpoint(root, run, log)
        run.wait(timeout=1200)
    finally:
        end_workflow(run, root)
    assert run.returncode == 0, tail(log, 4000)
    assert comparable_tables(root) == comparable_tables(local)

    # Every job but the local ones (`all`, and `card` and `verify`, which read the run's
    # results where the workflow runs) ran as a SLURM job, with the test account and
    # partition; the cancelled one shows as CANCELLED and again, resubmitted, as COMPLETED.
    local = collections.Counter({rule: plan[rule] for rule in LOCAL_RULES if rule in plan})
    jobs = accounting(root, since, expected=sum((plan - local).values()) + 1)  # + 1 resubmitted
    done = collections.Counter(r["comment"].split("_wildcards_")[0].removeprefix("rule_")
                               for r in jobs if r["state"] == "COMPLETED")
    assert done == plan - local, jobs
    assert [r["comment"] for r in jobs if r["state"] != "COMPLETED"] == [cancelled], jobs
    assert [r["state"] for r in jobs if r["comment"] == cancelled] == ["CANCELLED", "COMPLETED"]
    assert {(r["account"], r["partition"]) for r in jobs} == {(ACCOUNT, PARTITION)}
    summary = yaml.safe_load((run_dir / "summary.json").read_text())
    assert summary["resumed_from"] is not None and summary["resumed_from"] >= 1
