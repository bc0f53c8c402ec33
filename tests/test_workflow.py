"""The Snakemake workflow: lint-clean, suites discovered from benchmarks/, one-line config
errors. Runs in a copy of the workflow files so the repository is never written to."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from drmas.config import ROOT

WORKFLOW_FILES = ["Snakefile", "rules", "config", "benchmarks", "envs"]


def snakemake_bin():
    exe = Path(sys.executable).parent / "snakemake"
    return str(exe) if exe.exists() else "snakemake"


@pytest.fixture
def workflow(tmp_path):
    for name in WORKFLOW_FILES:
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp_path / name)
    return tmp_path


def snakemake(workdir, *args):
    return subprocess.run([snakemake_bin(), *args], cwd=workdir, capture_output=True, text=True,
                          timeout=300)


def test_lint_has_no_findings(workflow):
    proc = snakemake(workflow, "--lint")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Congratulations" in proc.stdout + proc.stderr


def test_new_suite_file_appears_in_dry_run(workflow):
    spec = yaml.safe_load((workflow / "benchmarks" / "math.yaml").read_text())
    spec["name"] = "arith_hard"
    spec["datasets"]["default"]["sources"] = {"arith-3": {"level": 3}}
    (workflow / "benchmarks" / "arith_hard.yaml").write_text(yaml.safe_dump(spec))
    proc = snakemake(workflow, "-n", "--config", "suites=[math,arith_hard]")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    for target in ("results/default/tables/arith_hard.md", "results/default/data/arith_hard/train.jsonl",
                   "results/default/runs/arith_hard/hetero/drmas/seed0/eval/scores.json",
                   "results/default/figures/arith_hard_theory_check.png",
                   "results/default/tables/math.md"):
        assert target in out, target


def test_default_dry_run_job_counts(workflow):
    proc = snakemake(workflow, "-n", "--quiet", "rules")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    counts = {line.split()[0]: int(line.split()[1]) for line in out.splitlines()
              if len(line.split()) == 2 and line.split()[1].isdigit()}
    # two suites (math, search) x 3 assignments x 2 methods; small + medium per suite
    assert counts["train"] == 12 and counts["evaluate_run"] == 12 and counts["evaluate_base"] == 6
    assert counts["warmstart"] == 4 and counts["index"] == 1 and counts["prepare"] == 2


@pytest.mark.parametrize("override,fragment", [
    ("train={'lr': 'fast'}", "'fast' is not of type 'number'"),
    ("suites=[nosuch]", "benchmark file not found"),
])
def test_bad_config_is_one_line(workflow, override, fragment):
    proc = snakemake(workflow, "-n", "--config", override)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    errors = [l for l in proc.stderr.splitlines() if l.startswith("drmas config error")]
    assert len(errors) == 1 and fragment in errors[0], proc.stderr
