"""Checkpoint and resume: a run killed with SIGKILL right after checkpoint k, then rerun,
ends exactly like an uninterrupted run (metrics.jsonl minus timings, final weights)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from drmas.train import checkpoint
from training import equal_weights, final_weights, stripped

TESTS = Path(__file__).resolve().parents[1]   # tests/, where conftest.py and training.py lie

CHILD = """
import dataclasses, json, sys
sys.path.insert(0, {tests!r})
import torch
from conftest import make_config
from drmas.config.profile import ResourceConfig
from training import make_trainer

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True, warn_only=True)
model, rows, out, backend, steps = sys.argv[1:]
cfg = make_config(model, steps=int(steps), save_every=1)
cfg = dataclasses.replace(cfg, resources=ResourceConfig(backend=backend, num_cpus=1))
t = make_trainer(cfg, json.load(open(rows)), out, "nonshared", "drmas")
print(json.dumps(t.run()))
"""

STEPS = 3


def start(tmp_path, model, rows, out, backend="local"):
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(tests=str(TESTS)))
    return subprocess.Popen([sys.executable, str(script), str(model), str(rows), str(out), backend,
                             str(STEPS)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc, timeout=300):
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def kill_after_checkpoint(proc, out: Path, k: int, timeout=300):
    marker = out / "checkpoints" / f"step{k}" / checkpoint.STATE
    deadline = time.time() + timeout
    while not marker.exists():
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        assert time.time() < deadline, "checkpoint never appeared"
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()


def same_run(a: Path, b: Path):
    assert stripped(a / "metrics.jsonl") == stripped(b / "metrics.jsonl")
    assert len(stripped(a / "metrics.jsonl")) == STEPS
    for g in ("solver", "verifier"):
        assert equal_weights(final_weights(a, g), final_weights(b, g))


@pytest.fixture(scope="module")
def reference(tiny_model_dir, math_rows, tmp_path_factory):
    """An uninterrupted run (in a subprocess, like the interrupted ones)."""
    tmp = tmp_path_factory.mktemp("reference")
    rows = tmp / "rows.json"
    rows.write_text(json.dumps([r for r in math_rows if r["split"] == "train"]))
    summary = finish(start(tmp, tiny_model_dir, rows, tmp / "run"))
    assert summary["resumed_from"] is None
    return tmp / "run", rows


def test_sigkill_after_checkpoint_then_resume_is_identical(reference, tiny_model_dir, tmp_path):
    ref, rows = reference
    out = tmp_path / "run"
    kill_after_checkpoint(start(tmp_path, tiny_model_dir, rows, out), out, k=2)
    assert not (out / "final").exists()
    summary = finish(start(tmp_path, tiny_model_dir, rows, out))
    assert summary["resumed_from"] == 2
    same_run(ref, out)
    assert (out / "tensorboard").is_dir() and any((out / "tensorboard").iterdir())
    # a rerun of a finished run trains nothing and leaves the results alone
    (out / "summary.json").unlink()
    assert finish(start(tmp_path, tiny_model_dir, rows, out))["resumed_from"] == STEPS
    same_run(ref, out)


@pytest.mark.slow
def test_ray_run_killed_and_resumed_matches(reference, tiny_model_dir, tmp_path):
    """The same with the Ray backend (the driver is killed; its actors go with it). Slow: two
    Ray starts; Ray = local is checked in test_pool, resume across worker counts in
    test_workers."""
    ref, rows = reference
    out = tmp_path / "run"
    kill_after_checkpoint(start(tmp_path, tiny_model_dir, rows, out, "ray"), out, k=1)
    summary = finish(start(tmp_path, tiny_model_dir, rows, out, "ray"))
    assert summary["resumed_from"] >= 1 and summary["backend"] == "ray"
    same_run(ref, out)


def test_incomplete_checkpoints_are_ignored_and_pruned(tmp_path):
    out = tmp_path / "run"
    root = out / "checkpoints"
    for step, complete in [(1, True), (2, True), (3, True), (4, False)]:
        d = checkpoint.step_dir(root, step)
        d.mkdir(parents=True)
        if complete:
            (d / checkpoint.STATE).write_text(json.dumps({"step": step}))
    (out / "checkpoints" / "step5.tmp").mkdir()
    assert checkpoint.latest(root).name == "step3"
    checkpoint.prune(root, keep=2)
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step2", "step3", "step4"]
    metrics = out / "metrics.jsonl"
    metrics.write_text('{"step": 1}\n{"step": 2}\n{"step": 3}\n{"st')
    checkpoint.truncate_metrics(metrics, 2)
    assert metrics.read_text() == '{"step": 1}\n{"step": 2}\n'
