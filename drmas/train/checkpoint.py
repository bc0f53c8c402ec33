"""Checkpoints of a run: save and resume (weights, optimiser, RNG states, step, data cursor).

Layout of `<checkpoints>/step<k>/` (and of `<run>/final/`, written without optimiser), where
`<checkpoints>` is the run's checkpoint root (`<run>/checkpoints` unless the workflow keeps it
apart: rules/train.smk):
`<group>/` as written by the group's `save` (model.safetensors + tokenizer, loadable by
`from_pretrained` and vLLM; optimizer.pt; rng_rank<r>.pt), `driver_rng.pkl`, and
`metrics.jsonl` (the run's metrics up to that step, restored on resume: the workflow removes
a run folder before it reruns the job), `trainer.json` ({step, sampler, groups,
identity_hash}: a plain dict), and last
`manifest.json`: the size and SHA-256 of every other file. A checkpoint is built in
`<name>.tmp`, every file flushed to disk, and renamed into place, so a crash at any moment
(even SIGKILL or power loss mid-write) leaves either the previous checkpoint or the new one,
never half of one: the next run resumes from the newest complete one instead of starting over.

A checkpoint damaged after it was written (a torn copy, a truncated file, a disk error) is
caught by `verify` before anything is loaded; the trainer then falls back to the newest one
that verifies (`Trainer.resume`).
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import random
import shutil
from pathlib import Path

import numpy as np

from drmas.data.io import read_json
from drmas.errors import DataError

STATE = "trainer.json"
MANIFEST = "manifest.json"
UNUSABLE = ".unusable"      # suffix of a checkpoint set aside by a resume that skipped it


def step_dir(root: Path, step: int) -> Path:
    return Path(root) / f"step{step}"


def _fsync_write(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def save(path: Path, groups: dict, state: dict, with_optimizer: bool = True,
         metrics: Path | None = None) -> None:
    """Write every group, the metrics so far and the trainer state to `path`, atomically."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for g, grp in groups.items():
        grp.save(tmp / g, with_optimizer=with_optimizer)
    if metrics is not None and Path(metrics).exists():
        _fsync_write(tmp / "metrics.jsonl", Path(metrics).read_bytes())
    _fsync_write(tmp / "driver_rng.pkl", pickle.dumps({"python": random.getstate(),
                                                       "numpy": np.random.get_state()}))
    _fsync_write(tmp / STATE, json.dumps(state).encode())
    write_manifest(tmp)
    old = path.with_name(path.name + ".old")
    if path.exists():                   # e.g. a `final/` of an earlier, finished run
        shutil.rmtree(old, ignore_errors=True)
        path.rename(old)
    tmp.rename(path)
    shutil.rmtree(old, ignore_errors=True)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def read_state(path: Path) -> dict:
    return read_json(Path(path) / STATE, what="checkpoint state")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name != MANIFEST)


def write_manifest(root: Path) -> None:
    """Record size and SHA-256 of every file under `root`, each first flushed to disk (the
    groups' writers do not fsync; a rename of unflushed files can survive a power loss as
    empty files)."""
    files = {}
    for p in _files(root):
        with open(p, "rb") as f:
            os.fsync(f.fileno())
        files[p.relative_to(root).as_posix()] = {"size": p.stat().st_size, "sha256": _sha256(p)}
    _fsync_write(root / MANIFEST, json.dumps({"files": files}, indent=1).encode())


def _state_problem(path: Path) -> str | None:
    """What is wrong with `trainer.json` (unreadable, or missing step / sampler), or None."""
    try:
        state = read_state(path)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return f"{STATE} is unreadable ({type(exc).__name__})"
    ok = (isinstance(state, dict) and isinstance(state.get("step"), int)
          and isinstance(state.get("sampler"), dict)
          and all(isinstance(state["sampler"].get(k), int) for k in ("epoch", "pos")))
    return None if ok else f"{STATE} lacks an integer step or sampler epoch/pos"


def verify(path: Path) -> str | None:
    """Why the checkpoint at `path` cannot be used (a short phrase), or None when it can.

    Every file must have the size and checksum its manifest records. A checkpoint written
    before manifests existed is accepted when its state file reads; its files are then only
    checked by loading them.
    """
    path = Path(path)
    try:
        if not (path / MANIFEST).exists():
            return _state_problem(path)
        listed = read_json(path / MANIFEST, what="checkpoint manifest")["files"]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, DataError) as exc:
        return f"{MANIFEST} is unreadable ({type(exc).__name__})"
    for name, want in listed.items():
        f = path / name
        if not f.is_file():
            return f"{name} is missing"
        size = f.stat().st_size
        if size != want["size"]:
            return f"{name} has {size} bytes, {want['size']} were written"
        if _sha256(f) != want["sha256"]:
            return f"{name} does not match its checksum"
    return _state_problem(path)


def set_aside(path: Path) -> Path:
    """Rename an unusable checkpoint out of the resume candidates (kept for inspection)."""
    path = Path(path)
    target = path.with_name(path.name + UNUSABLE)
    shutil.rmtree(target, ignore_errors=True)
    path.rename(target)
    return target


def complete(root: Path) -> list[Path]:
    """The complete checkpoints under `root` (those with their state file), oldest step first."""
    done = [p.parent for p in Path(root).glob(f"step*/{STATE}")
            if p.parent.name[4:].isdigit()]
    return sorted(done, key=lambda p: int(p.name[4:]))


def latest(root: Path) -> Path | None:
    """The newest complete checkpoint under `root` (by step), or None."""
    done = complete(root)
    return done[-1] if done else None


def finished(out: Path, steps: int) -> bool:
    """Whether `final/` holds a complete, intact save of all `steps` steps."""
    final = Path(out) / "final"
    return ((final / STATE).exists() and verify(final) is None
            and read_state(final)["step"] >= steps)


def restore_driver_rng(path: Path) -> None:
    f = Path(path) / "driver_rng.pkl"
    if f.exists():
        state = pickle.loads(f.read_bytes())
        random.setstate(state["python"])
        np.random.set_state(state["numpy"])


def prune(root: Path, keep: int = 2) -> None:
    """Drop all but the newest `keep` complete checkpoints, and any unfinished `*.tmp`."""
    root = Path(root)
    for stale in root.glob("*.tmp"):
        shutil.rmtree(stale, ignore_errors=True)
    for p in complete(root)[:-keep]:
        shutil.rmtree(p, ignore_errors=True)


def truncate_metrics(path: Path, step: int) -> None:
    """Keep the metrics lines of steps 1..`step` (a crash may leave later or partial lines)."""
    path = Path(path)
    if not path.exists():
        return
    keep = []
    for line in path.read_text().splitlines():
        try:
            m = json.loads(line)
        except json.JSONDecodeError:       # a line cut by the crash
            continue
        if m.get("step", 0) <= step:
            keep.append(line)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(l + "\n" for l in keep))
    tmp.replace(path)
