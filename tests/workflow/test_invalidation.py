"""Precise invalidation: with every output of the default workflow present, a one-key change
reruns exactly the jobs that read that key (their rule's `params.key`), nothing else.

The outputs are made present with Snakemake's own `--touch` (which records the params of
every job, as a real run does), after creating the files `--summary` lists; then each change
is applied on the command line and the dry run's jobs are compared with the expected set,
written out by hand below from what each stage reads.
"""

import re
from collections import Counter
from pathlib import Path

import pytest
import yaml

from repo import copy_workflow, snakemake

SUITES, ASSIGNMENTS, METHODS = ("math", "search"), ("shared", "nonshared", "hetero"), ("grpo", "drmas")


# The default profile, pinned to the matrix these expectations are written for: one seed and
# every assignment in every suite (config/default.yaml runs three seeds and math without
# hetero), so that a change of the default profile's size does not rewrite this file.
PROFILE = "config/invalidation.yaml"
PINNED = ("--configfile", PROFILE)          # every Snakemake call below runs this profile


def pinned_default(root: Path) -> None:
    raw = yaml.safe_load((root / "config" / "default.yaml").read_text())
    raw["seeds"] = [0]
    raw["suite_overrides"].pop("math", None)
    (root / PROFILE).write_text(yaml.safe_dump(raw))


@pytest.fixture(scope="module")
def touched(tmp_path_factory):
    """A copy of the workflow whose every output exists and is up to date."""
    root = tmp_path_factory.mktemp("touched")
    copy_workflow(root)
    pinned_default(root)
    spec = yaml.safe_load((root / "benchmarks" / "math.yaml").read_text())
    spec["name"] = "arith_hard"
    spec["datasets"]["default"]["sources"] = {"arith-3": {"level": 3}}
    (root / "benchmarks" / "arith_hard.yaml").write_text(yaml.safe_dump(spec))
    summary = snakemake(root, *PINNED, "--summary", "--cores", "1")
    assert summary.returncode == 0, summary.stderr
    for line in summary.stdout.splitlines()[1:]:
        path = Path(root / line.split("\t")[0])
        if path.suffix:                       # files; extension-less outputs are folders
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
        else:
            path.mkdir(parents=True, exist_ok=True)
    touch = snakemake(root, *PINNED, "--touch", "--forceall", "--cores", "1")   # every job, metadata too
    assert touch.returncode == 0, touch.stderr
    return root


def planned(root, *config) -> Counter:
    """(rule, wildcards) of every job the dry run would run, 'all' left out."""
    args = ["-n", "--cores", "1"] + (["--config", *config] if config else [])
    proc = snakemake(root, *PINNED, *args)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    jobs, rule = Counter(), None
    for line in proc.stdout.splitlines():
        m = re.match(r"^(?:local)?rule (\w+):$", line.strip())
        if m:
            rule = m.group(1)
        elif line.strip().startswith("wildcards:") and rule:
            jobs[(rule, line.strip()[len("wildcards: "):])] += 1
    return jobs


def count(jobs: Counter) -> dict:
    out = Counter()
    for (r, _), n in jobs.items():
        out[r] += n
    return dict(out)


def runs(suites=SUITES, assignments=ASSIGNMENTS, methods=METHODS, seeds=(0,)):
    return {f"suite={s}, assignment={a}, method={m}, seed={k}"
            for s in suites for a in assignments for m in methods for k in seeds}


def wildcards_of(jobs, rule):
    return {w for (r, w) in jobs if r == rule}


def test_nothing_to_do_when_everything_is_present(touched):
    assert planned(touched) == Counter()


def test_new_seed_runs_only_that_seed(touched):
    jobs = planned(touched, "seeds=[0,1]")
    assert wildcards_of(jobs, "train") == runs(seeds=(1,))
    assert wildcards_of(jobs, "evaluate_run") == runs(seeds=(1,))
    # base models are evaluated at the first seed only: a new seed adds no base evaluation
    assert count(jobs) == {"train": 12, "evaluate_run": 12, "table": 2, "figures": 2}


@pytest.mark.parametrize("change", ["eval={n: 8}", "eval={temperature: 0.7}"])
def test_eval_setting_reruns_evaluations_and_tables(touched, change):
    assert count(planned(touched, change)) == {"evaluate_run": 12, "evaluate_base": 6, "table": 2}


def test_new_method_runs_only_that_method(touched):
    jobs = planned(touched, "methods=[grpo,drmas,mean_agent_std_global]")
    assert wildcards_of(jobs, "train") == runs(methods=("mean_agent_std_global",))
    assert count(jobs) == {"train": 6, "evaluate_run": 6, "table": 2, "figures": 2}


def test_train_lr_reruns_training_not_data_or_warm_starts(touched):
    jobs = planned(touched, "train={lr: 5.0e-4}")
    assert wildcards_of(jobs, "train") == runs()
    assert count(jobs) == {"train": 12, "evaluate_run": 12, "table": 2, "figures": 2}


def test_per_agent_lr_reruns_only_the_runs_where_that_agent_trains_alone(touched):
    """Under sharing the Solver and the Verifier train one model, so a Solver-only learning
    rate is an error there (one line); without the shared assignment it reruns the math
    runs, where the Solver has a group of its own, and nothing of search."""
    base = planned(touched, "assignments=[nonshared,hetero]")
    jobs = planned(touched, "assignments=[nonshared,hetero]", "agents={solver: {lr: 5.0e-4}}")
    extra = jobs - base
    expected = runs(suites=("math",), assignments=("nonshared", "hetero"))
    assert wildcards_of(extra, "train") == expected
    assert wildcards_of(extra, "evaluate_run") == expected
    assert count(extra) == {"train": 4, "evaluate_run": 4}
    proc = snakemake(touched, *PINNED, "-n", "--config", "agents={solver: {lr: 5.0e-4}}")
    assert proc.returncode != 0 and "'solver' and 'verifier' share model 'small' in assignment 'shared'" in proc.stderr


def test_warmstart_steps_reruns_the_small_models_and_what_uses_them(touched):
    jobs = planned(touched, "warmstart={steps: 300}")
    # medium has its own `warmstart: {steps: 300}`; every assignment uses small somewhere
    assert wildcards_of(jobs, "warmstart") == {"suite=math, model=small", "suite=search, model=small"}
    assert count(jobs) == {"warmstart": 2, "train": 12, "evaluate_run": 12, "evaluate_base": 6,
                           "table": 2, "figures": 2}


def test_new_suite_runs_only_that_suite(touched):
    jobs = planned(touched, "suites=[math,search,arith_hard]")
    assert {w.split(",")[0] for _, w in jobs} == {"suite=arith_hard"}
    assert count(jobs) == {"prepare": 1, "tokenizer": 1, "warmstart": 2, "train": 6,
                           "evaluate_run": 6, "evaluate_base": 3, "table": 1, "figures": 1}


def test_a_search_option_reruns_the_search_suite_from_its_tokenizer(touched):
    """The demonstrations follow the last turn's flow (the search MAS's `last_turn` option),
    so the search tokenizer and warm starts rerun, then every search run and evaluation;
    nothing of math."""
    jobs = planned(touched, "mas_options={search: {last_turn: answer}}")
    assert {w.split(",")[0] for _, w in jobs} == {"suite=search"}
    assert wildcards_of(jobs, "train") == runs(suites=("search",))
    assert count(jobs) == {"tokenizer": 1, "warmstart": 2, "train": 6, "evaluate_run": 6,
                           "evaluate_base": 3, "table": 1, "figures": 1}
