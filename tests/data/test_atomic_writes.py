"""No output is ever partial, and the environment's errors are one line: every file and folder
drmas writes lands atomically (`drmas.data.io.atomic_path`, `atomic_write_text`,
`atomic_dir`: written beside under a hidden name, renamed into place), and a file-system
OSError (a full disk, a read-only or unusable folder, a permission) is one stderr line naming
the final path and the cause, exit status 2. The failures are injected (a write that fails
with ENOSPC after some bytes, /dev/full, an EROFS / EACCES on creating the temporary): the
tests run as root, which no permission stops, and mount no file system."""

from __future__ import annotations

import builtins
import errno
import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from conftest import make_config, math_suite
from drmas.cli import main as cli
from drmas.data import io
from drmas.data.io import atomic_dir, atomic_path, atomic_write_text, write_jsonl
from drmas.evaluation.runner import reuse_base
from repo import REPO as ROOT
from runs import good_scores

CONFIG = ROOT / "config" / "default.yaml"
SEARCH = ROOT / "benchmarks" / "search.yaml"      # a generated suite with a corpus
NO_SPACE = os.strerror(errno.ENOSPC)             # "No space left on device"


def no_space() -> OSError:
    """What a write on a full file system raises: errno and strerror, no file name."""
    return OSError(errno.ENOSPC, NO_SPACE)


def run(capsys, *argv) -> tuple[int, list[str]]:
    status = cli.main([str(a) for a in argv])
    return status, [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def everything(folder: Path) -> list[str]:
    """Every name under `folder` (hidden temporaries included), relative, sorted."""
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


class FillsUp:
    """A text or binary file that takes `room` bytes (characters), then fails as a full disk."""

    def __init__(self, real, room: int):
        self.real, self.room = real, room

    def write(self, data):
        if len(data) > self.room:
            self.real.write(data[:self.room])
            self.real.flush()
            self.room = 0
            raise no_space()
        self.room -= len(data)
        return self.real.write(data)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.real.close()

    def __getattr__(self, name):
        return getattr(self.real, name)


def full_disk_open(room: int, only: str = ""):
    """An `open` for drmas.data.io whose files opened for writing (named `.<only>...`) fill
    up after `room` bytes; the first bytes do reach the disk."""
    def fake(file, mode="r", *args, **kwargs):
        handle = builtins.open(file, mode, *args, **kwargs)
        if "w" in mode and Path(file).name.startswith(f".{only}"):
            return FillsUp(handle, room)
        return handle
    return fake


# -- (a) a full disk during `drmas prepare` ----------------------------------------------------
@pytest.mark.parametrize("disk", ["fills after 4 kB", "/dev/full"])
def test_prepare_on_a_full_disk_is_one_line_and_leaves_no_file(tmp_path, capsys, monkeypatch, disk):
    if disk == "/dev/full":
        if not os.path.exists("/dev/full"):
            pytest.skip("no /dev/full here")
        # the kernel's own ENOSPC: every write to /dev/full fails, on the first flush
        def fake(file, mode="r", *args, **kwargs):
            return builtins.open("/dev/full" if "w" in mode else file, mode, *args, **kwargs)
        monkeypatch.setattr(io, "open", fake, raising=False)
    else:
        monkeypatch.setattr(io, "open", full_disk_open(4096, "corpus.jsonl"), raising=False)
    out = tmp_path / "data"
    status, err = run(capsys, "prepare", "--config", CONFIG, "--suite", SEARCH, "--out", out)
    assert status == 2
    assert err == [f"drmas prepare: error: cannot write {out / 'corpus.jsonl'}: {NO_SPACE}"]
    assert everything(out) == []            # no corpus.jsonl, no temporary, no later split
    assert not list(tmp_path.glob("*.error.log"))


def test_prepare_on_a_full_disk_keeps_the_previous_output(tmp_path, capsys, monkeypatch):
    out = tmp_path / "data"
    status, _ = run(capsys, "prepare", "--config", CONFIG, "--suite", SEARCH, "--out", out)
    assert status == 0
    before = {name: (out / name).read_bytes() for name in everything(out)}
    assert set(before) == {"corpus.jsonl", "test.jsonl", "train.jsonl", "heldout.jsonl"}
    monkeypatch.setattr(io, "open", full_disk_open(100, "train.jsonl"), raising=False)
    status, err = run(capsys, "prepare", "--config", CONFIG, "--suite", SEARCH, "--out", out)
    assert status == 2
    assert err == [f"drmas prepare: error: cannot write {out / 'train.jsonl'}: {NO_SPACE}"]
    assert {name: (out / name).read_bytes() for name in everything(out)} == before


# -- (b) a read-only, unwritable or unusable output folder -------------------------------------
@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES])
def test_prepare_into_a_read_only_folder_is_one_line(tmp_path, capsys, monkeypatch, code):
    out = tmp_path / "data"
    out.mkdir()
    real_open = os.open

    def refusing(path, flags, *args, **kwargs):     # what the kernel says on creating a file
        if flags & os.O_CREAT and Path(os.fsdecode(path)).parent == out:
            raise OSError(code, os.strerror(code), os.fsdecode(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing)
    status, err = run(capsys, "prepare", "--config", CONFIG, "--suite", SEARCH, "--out", out)
    assert status == 2
    assert err == [f"drmas prepare: error: cannot write {out / 'corpus.jsonl'}: {os.strerror(code)}"]
    assert everything(out) == []


def test_prepare_under_a_file_is_one_line(tmp_path, capsys):
    (tmp_path / "afile").write_text("not a folder")
    out = tmp_path / "afile" / "data"
    status, err = run(capsys, "prepare", "--config", CONFIG, "--suite", SEARCH, "--out", out)
    assert status == 2
    assert err == [f"drmas prepare: error: cannot write {out}: {os.strerror(errno.ENOTDIR)}"]


def test_other_os_errors_keep_their_class(tmp_path, capsys, monkeypatch):
    """A file-system OSError outside the atomic writers is one line too (its own file name);
    an OSError that is not the file system's (a socket) stays unexpected: exit 1 and a log."""
    from drmas.bench import advantages

    def denied(**_):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), "/srv/shared/x.json")

    monkeypatch.setattr(advantages, "main_advantages", denied)
    status, err = run(capsys, "perf", "advantages", "--rows", "10")
    assert status == 2
    assert err == [f"drmas perf: error: cannot access /srv/shared/x.json: {os.strerror(errno.EACCES)}"]

    def refused(**_):
        raise ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")

    monkeypatch.setattr(advantages, "main_advantages", refused)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    status, err = run(capsys, "perf", "advantages", "--rows", "10")
    assert status == 1 and len(err) == 1
    assert err[0].startswith("drmas perf: unexpected error: ConnectionRefusedError")


# -- (c) each helper: the old output intact on failure, replaced on success --------------------
def test_atomic_write_text_keeps_the_old_file_when_the_write_fails(tmp_path, monkeypatch):
    path = tmp_path / "scores.json"
    path.write_text("old")
    real = Path.write_text

    def half_then_full(self, text, *args, **kwargs):
        real(self, text[:len(text) // 2], *args, **kwargs)
        raise no_space()

    monkeypatch.setattr(Path, "write_text", half_then_full)
    with pytest.raises(OSError) as caught:
        atomic_write_text(path, "new " * 1000)
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(path)
    assert path.read_text() == "old" and everything(tmp_path) == ["scores.json"]
    monkeypatch.undo()
    atomic_write_text(path, "new\n")
    assert path.read_bytes() == b"new\n" and everything(tmp_path) == ["scores.json"]


def test_atomic_write_text_makes_the_folder_and_the_usual_permissions(tmp_path):
    path = tmp_path / "a" / "b" / "t.md"
    atomic_write_text(path, "Δ table\n", encoding="utf-8")
    plain = tmp_path / "plain.md"
    plain.write_text("Δ table\n", encoding="utf-8")
    assert path.read_bytes() == plain.read_bytes()
    assert path.stat().st_mode & 0o777 == plain.stat().st_mode & 0o777    # not mkstemp's 0600


@pytest.mark.parametrize("failure", [OSError(errno.ENOSPC, NO_SPACE), KeyboardInterrupt(),
                                     ValueError("a bug")])
def test_atomic_path_removes_its_temporary_on_any_error(tmp_path, failure):
    path = tmp_path / "samples.jsonl"
    path.write_bytes(b"old\n")
    seen = []
    with pytest.raises(type(failure)):
        with atomic_path(path) as tmp:
            seen.append(tmp)
            assert tmp.parent == tmp_path and tmp.name.startswith(".samples.jsonl.")
            tmp.write_bytes(b"half a li")
            raise failure
    assert not seen[0].exists() and path.read_bytes() == b"old\n"
    assert everything(tmp_path) == ["samples.jsonl"]


def test_atomic_path_replaces_on_success_and_names_the_final_path(tmp_path):
    path = tmp_path / "offsets.npy"
    path.write_bytes(b"old")
    with atomic_path(path) as tmp:
        tmp.write_bytes(b"new")
        assert path.read_bytes() == b"old"          # not before the block ends
    assert path.read_bytes() == b"new" and everything(tmp_path) == ["offsets.npy"]
    with pytest.raises(OSError) as caught:          # an error naming the temporary
        with atomic_path(path) as tmp:
            raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT), str(tmp))
    assert caught.value.filename == str(path) and caught.value.drmas_action == "write"


def test_write_jsonl_keeps_the_old_file_when_the_disk_fills(tmp_path, monkeypatch):
    path = tmp_path / "corpus.jsonl"
    write_jsonl(path, [{"id": "old"}])
    before = path.read_bytes()
    monkeypatch.setattr(io, "open", full_disk_open(50), raising=False)
    with pytest.raises(OSError) as caught:
        write_jsonl(path, ({"id": str(i), "contents": "x" * 20} for i in range(100)))
    assert caught.value.filename == str(path)
    assert path.read_bytes() == before and everything(tmp_path) == ["corpus.jsonl"]


def test_atomic_dir_keeps_the_old_folder_when_the_save_fails(tmp_path):
    path = tmp_path / "model"
    path.mkdir()
    (path / "config.json").write_text("old")
    (path / "model.safetensors").write_bytes(b"old weights")
    with pytest.raises(OSError) as caught:
        with atomic_dir(path) as partial:
            assert partial.parent == tmp_path and partial.name.startswith(".model.")
            assert list(partial.iterdir()) == []
            (partial / "config.json").write_text("new")          # config first, then
            raise OSError(errno.ENOSPC, NO_SPACE, str(partial / "model.safetensors"))
    assert caught.value.filename == str(path / "model.safetensors")
    assert everything(tmp_path) == ["model", "model/config.json", "model/model.safetensors"]
    assert (path / "config.json").read_text() == "old"


def test_atomic_dir_replaces_the_old_folder_when_complete(tmp_path):
    path = tmp_path / "tokenizer"
    path.mkdir()
    (path / "stale.json").write_text("from an older run")
    with atomic_dir(path) as partial:
        (partial / "tokenizer.json").write_text("new")
        (partial / "sub").mkdir()
        (partial / "sub" / "x").write_text("y")
        assert (path / "stale.json").exists()                   # not before the block ends
    assert everything(tmp_path) == ["tokenizer", "tokenizer/sub", "tokenizer/sub/x",
                                    "tokenizer/tokenizer.json"]
    fresh = tmp_path / "new" / "folder"                          # parents made, nothing there
    with atomic_dir(fresh) as partial:
        (partial / "a").write_text("b")
    assert (fresh / "a").read_text() == "b" and everything(tmp_path / "new") == ["folder", "folder/a"]


def test_atomic_dir_puts_the_old_folder_back_when_the_last_rename_fails(tmp_path, monkeypatch):
    path = tmp_path / "model"
    path.mkdir()
    (path / "config.json").write_text("old")
    real = os.rename

    def rename(src, dst):
        if Path(src).name.endswith(".partial"):
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(src), str(dst))
        return real(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(OSError) as caught:
        with atomic_dir(path) as partial:
            (partial / "config.json").write_text("new")
    assert caught.value.filename == str(path)
    assert everything(tmp_path) == ["model", "model/config.json"]
    assert (path / "config.json").read_text() == "old"


def test_save_pretrained_through_atomic_dir_writes_the_same_bytes(tmp_path, math_rows):
    """The temporary folder's name leaves no trace in a saved model or tokenizer."""
    from conftest import SMALL, math_tokenizer
    from drmas.models.tiny import tiny_model

    tok = math_tokenizer(math_rows)
    model = tiny_model(SMALL, len(tok), seed=0)
    model.save_pretrained(tmp_path / "plain", safe_serialization=True)
    tok.save_pretrained(tmp_path / "plain")
    with atomic_dir(tmp_path / "atomic") as partial:
        model.save_pretrained(partial, safe_serialization=True)
        tok.save_pretrained(partial)
    names = everything(tmp_path / "plain")
    assert names == everything(tmp_path / "atomic")
    for name in names:
        assert (tmp_path / "plain" / name).read_bytes() == (tmp_path / "atomic" / name).read_bytes()


# -- (d) the table and scores writers go through the helpers ----------------------------------
def test_table_on_a_full_disk_leaves_no_csv(tmp_path, capsys, monkeypatch):
    scores = good_scores(tmp_path / "s" / "scores.json")
    out = tmp_path / "t" / "math"
    args = ("table", "--config", CONFIG, "--suite", ROOT / "benchmarks" / "math.yaml",
            "--scores", scores, "--out", out)
    status, _ = run(capsys, *args)
    assert status == 0
    before = {name: (out.parent / name).read_bytes() for name in everything(out.parent)}
    assert set(before) == {"math.csv", "math.md", "math.tex", "math_stats.csv", "math_stats.md"}
    real = pd.DataFrame.to_csv

    def half_then_full(self, path, **kwargs):
        text = real(self, None, **kwargs)
        Path(path).write_text(text[:len(text) // 2])
        raise no_space()

    shutil.rmtree(out.parent)
    monkeypatch.setattr(pd.DataFrame, "to_csv", half_then_full)
    status, err = run(capsys, *args)
    assert status == 2
    assert err == [f"drmas table: error: cannot write {out}.csv: {NO_SPACE}"]
    assert everything(out.parent) == ["math.md"]        # written before; no csv, no tex, no temp
    monkeypatch.undo()
    status, _ = run(capsys, *args)
    assert status == 0
    assert {name: (out.parent / name).read_bytes() for name in everything(out.parent)} == before


def test_reused_base_evaluation_on_a_full_disk_leaves_no_samples(tmp_path, monkeypatch):
    twin = tmp_path / "shared"
    twin.mkdir()
    (twin / "samples.jsonl").write_text('{"problem_id": "p", "score": 1.0}\n' * 100)
    (twin / "scores.json").write_text(json.dumps({"meta": {"assignment": "shared", "method": "base"},
                                                  "overall": {"avg@4": 1.0}}))
    meta = {"suite": "math", "assignment": "nonshared", "seed": 0, "method": "base"}
    cfg, out = make_config(tmp_path / "no-model"), tmp_path / "copy"
    real = shutil.copyfile

    def half_then_full(src, dst):
        Path(dst).write_bytes(Path(src).read_bytes()[:500])
        raise no_space()

    monkeypatch.setattr(shutil, "copyfile", half_then_full)
    with pytest.raises(OSError) as caught:
        reuse_base(cfg, math_suite(), twin, out, meta)
    assert caught.value.filename == str(out / "samples.jsonl")
    assert everything(out) == []
    monkeypatch.setattr(shutil, "copyfile", real)
    scores = reuse_base(cfg, math_suite(), twin, out, meta)
    assert everything(out) == ["samples.jsonl", "scores.json"]
    assert (out / "samples.jsonl").read_bytes() == (twin / "samples.jsonl").read_bytes()
    assert json.loads((out / "scores.json").read_text()) == scores
