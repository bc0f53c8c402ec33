"""Reduced configurations of the default workflow for the slow end-to-end tests, and a copy
of the workflow that runs one."""

import subprocess
import time
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
    "datasets": {"math": "default", "search": "default"},
    "models": {"small": {"kind": "tiny", "hidden_size": 64, "layers": 2, "heads": 1, "intermediate_size": 128},
               "medium": {"kind": "tiny", "hidden_size": 64, "layers": 3, "heads": 1, "intermediate_size": 128,
                          "warmstart": {"steps": 40}}},
    "tokenizer": {"vocab_size": 512},
    "warmstart": {"steps": 40, "batch_size": 16, "lr": 3.0e-3, "mistake_rate": 0.3},
    "train": {"steps": 3, "prompts_per_step": 4, "group_n": 4, "ppo_mini_batches": 2,
              "micro_batch_rows": 64, "lr": 5.0e-5, "max_response_tokens": 24, "save_every": 2},
    "eval": {"n": 4, "temperature": 0.6, "top_p": 0.95, "batch_size": 128, "max_problems_per_source": 4},
    "suite_overrides": {"math": {"assignments": ["shared", "nonshared", "hetero"]},
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


def first_checkpointed_run(root: Path, proc: subprocess.Popen, timeout: float,
                           profile: str = REDUCED["profile"]) -> Path:
    """Wait (polling every 0.05 s) until an RL run of the workflow that `proc` runs in `root`
    has a complete checkpoint (renamed into place, not `step<k>.tmp`: mid-run, with later
    steps, its final save and its evaluation still to come); returns that run's
    `<suite>/<assignment>/<method>/seed<k>`, the same under runs/ and checkpoints/."""
    folder = root / "results" / profile / "checkpoints"
    deadline = time.time() + timeout
    while not (hits := [c for c in folder.glob("*/*/*/seed*") if checkpoint.latest(c)]):
        assert proc.poll() is None, "the workflow ended before any checkpoint:\n" + (
            proc.stderr.read()[-3000:] if proc.stderr else "")
        assert time.time() < deadline, "no checkpoint appeared"
        time.sleep(0.05)
    return hits[0].relative_to(folder)
