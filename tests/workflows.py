"""Reduced configurations of the default workflow for the slow end-to-end tests, and a copy
of the workflow that runs one."""

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from drmas.config.layers import deep_merge
from drmas.train import checkpoint
from repo import REPO, copy_workflow

# One seed, Ray actors (the default profile runs its groups in-process to fit three seeds in
# 30 minutes; this keeps the Ray path under the whole workflow) and hetero on math too.
REDUCED = {
    "profile": "e2e",
    "seeds": [0],
    "resources": {"backend": "ray"},
    "datasets": {"math": "basic", "search": "default"},     # the small tasks: the pipeline, not the difficulty
    "models": {"small": {"kind": "tiny", "hidden_size": 64, "layers": 2, "heads": 1, "intermediate_size": 128},
               "medium": {"kind": "tiny", "hidden_size": 64, "layers": 3, "heads": 1, "intermediate_size": 128,
                          "warmstart": {"steps": 40}}},
    "tokenizer": {"vocab_size": 512},
    "warmstart": {"steps": 40, "batch_size": 16, "lr": 3.0e-3, "mistake_rate": 0.3},
    "train": {"steps": 3, "prompts_per_step": 4, "group_n": 4, "ppo_mini_batches": 2,
              "micro_batch_rows": 64, "lr": 5.0e-5, "max_response_tokens": 24, "save_every": 2},
    "eval": {"n": 4, "temperature": 0.6, "top_p": 0.95, "batch_size": 128, "max_problems_per_source": 4},
    "suite_overrides": {"math": {"assignments": ["shared", "nonshared", "hetero"],
                                 "warmstart": {"steps": 40, "mistake_rate": 0.3},
                                 "train": {"steps": 3, "save_every": 2, "paired_every": 7},
                                 "eval": {"max_problems_per_source": 4}},
                        "search": {"warmstart": {"steps": 40}, "eval": {"max_problems_per_source": 4},
                                   "train": {"prompts_per_step": 2, "group_n": 4, "steps": 3}}},
}


def reduced_workflow(root: Path, config: dict = REDUCED) -> Path:
    """The workflow copied into `root` (see repo.copy_workflow) with config/<profile>.yaml:
    config/default.yaml reduced key by key by `config` (deep_merge). Returns `root`."""
    copy_workflow(root)
    raw = yaml.safe_load((REPO / "config" / "default.yaml").read_text())
    deep_merge(raw, config)   # the default profile, reduced key by key
    (root / "config" / f"{config['profile']}.yaml").write_text(yaml.safe_dump(raw))
    return root


def comparable_tables(root: Path, profile: str = REDUCED["profile"]) -> dict[str, bytes]:
    """{name: bytes} of every table a run in `root` wrote but the efficiency ones (wall times,
    which differ between any two runs): what two runs of one config are compared by."""
    folder = root / "results" / profile / "tables"
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())
            if p.is_file() and "_efficiency." not in p.name}


def start_workflow(root: Path, args: list[str], env: dict, log: Path) -> subprocess.Popen:
    """Snakemake with `args` in `root`, in a session of its own (so that a test can signal
    its whole process group), its stderr written to `log`. A file, not a pipe: nobody reads
    a pipe while the test waits, and a workflow that fills one (64 KB) blocks in its next
    write, which looks like a workflow that never makes progress."""
    with open(log, "w") as stderr:          # the child keeps its own copy of the descriptor
        return subprocess.Popen(args, cwd=root, env=env, text=True, stdout=subprocess.DEVNULL,
                                stderr=stderr, start_new_session=True)


def tail(path: Path, chars: int = 3000) -> str:
    """The end of a text file ('' when there is none)."""
    return path.read_text(errors="replace")[-chars:] if path.exists() else ""


def first_checkpointed_run(root: Path, proc: subprocess.Popen, timeout: float, log: Path,
                           profile: str = REDUCED["profile"],
                           explain: Callable[[], str] | None = None) -> Path:
    """Wait (polling every 0.05 s) until an RL run of the workflow that `proc` runs in `root`
    (its stderr in `log`) has a complete checkpoint (renamed into place, not `step<k>.tmp`:
    mid-run, with later steps, its final save and its evaluation still to come); returns that
    run's `<suite>/<assignment>/<method>/seed<k>`, the same under runs/ and checkpoints/. On a
    timeout the failure holds Snakemake's output, the workflow's job logs and whatever
    `explain()` adds (the scheduler's view, say), so that a run that stalled says where."""
    folder = root / "results" / profile / "checkpoints"
    deadline = time.time() + timeout
    while not (hits := [c for c in folder.glob("*/*/*/seed*") if checkpoint.latest(c)]):
        assert proc.poll() is None, f"the workflow ended before any checkpoint:\n{tail(log)}"
        if time.time() >= deadline:
            extra = explain() if explain else ""
            raise AssertionError(f"no checkpoint appeared in {timeout:.0f} s\nSnakemake:\n"
                                 f"{tail(log)}\n{extra}"
                                 f"{log_tails(root / 'results' / profile / 'logs')}")
        time.sleep(0.05)
    return hits[0].relative_to(folder)


def log_tails(folder: Path, lines: int = 8) -> str:
    """The last `lines` lines of every log file under `folder`, newest first, for a failure
    message."""
    logs = sorted((p for p in folder.rglob("*.log") if p.is_file()),
                  key=lambda p: p.stat().st_mtime, reverse=True)
    parts = [f"--- {p.relative_to(folder)}\n" +
             "\n".join(p.read_text(errors="replace").splitlines()[-lines:]) for p in logs]
    return "\n".join(parts) if parts else f"(no logs under {folder})"
