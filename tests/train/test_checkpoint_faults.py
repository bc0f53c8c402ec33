"""Damaged checkpoints: each fault (an empty or truncated
model.safetensors, a truncated optimizer.pt, a bad trainer.json, a garbage RNG file) gives
one line on stderr and a resume from the newest intact checkpoint, never a traceback; with
none intact the run stops with one line naming the folder."""

import json
import shutil
from pathlib import Path

import pytest
import torch

from conftest import make_config
from drmas.errors import DrmasError
from drmas.train import checkpoint
from drmas.train.trainer import Trainer
from training import equal_weights, final_weights, load_weights, make_trainer, stripped

STEPS = 3
GROUP = "small"            # the one group of the "shared" assignment


def trainer(model_dir, rows, out) -> Trainer:
    return make_trainer(make_config(model_dir, steps=STEPS, save_every=1), rows, out, "shared", "drmas")


@pytest.fixture(scope="module")
def reference(tiny_model_dir, math_rows, tmp_path_factory):
    """An uninterrupted run: checkpoints step1 and step2, then final/ (step 3)."""
    rows = [r for r in math_rows if r["split"] == "train"]
    out = tmp_path_factory.mktemp("reference") / "run"
    torch.set_num_threads(1)
    trainer(tiny_model_dir, rows, out).run()
    return out, rows


def crashed_copy(reference, tmp_path) -> Path:
    """The reference run as a crash right after checkpoint step2 would leave it."""
    out = tmp_path / "run"
    shutil.copytree(reference, out)
    shutil.rmtree(out / "final")
    (out / "summary.json").unlink()
    return out


def truncate(path: Path, size=None):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2 if size is None else size])


def garbage(path: Path):
    path.write_bytes(b"\x00garbage\xff" * 40)


def stderr_lines(capsys) -> list[str]:
    return [l for l in capsys.readouterr().err.splitlines() if l.startswith("drmas")]


FAULTS = {   # name: (file inside step2, damage, phrase of the message)
    "empty model.safetensors": (f"{GROUP}/model.safetensors", lambda p: truncate(p, 0),
                                f"{GROUP}/model.safetensors has 0 bytes"),
    "truncated model.safetensors": (f"{GROUP}/model.safetensors", truncate,
                                    f"{GROUP}/model.safetensors has "),
    "truncated optimizer.pt": (f"{GROUP}/optimizer.pt", truncate, f"{GROUP}/optimizer.pt has "),
    "bad trainer.json": ("trainer.json", lambda p: p.write_text('{"step": 2, "sampl'),
                         "trainer.json has "),
    "trainer.json edited, same size": ("trainer.json",
                                       lambda p: p.write_text(p.read_text().replace("2", "7", 1)),
                                       "trainer.json does not match its checksum"),
    "garbage RNG file": (f"{GROUP}/rng_rank0.pt", garbage, f"{GROUP}/rng_rank0.pt has "),
    "garbage driver RNG file": ("driver_rng.pkl", garbage, "driver_rng.pkl has "),
    "missing optimizer.pt": (f"{GROUP}/optimizer.pt", Path.unlink, f"{GROUP}/optimizer.pt is missing"),
    "bad manifest": ("manifest.json", garbage, "manifest.json is unreadable"),
}


@pytest.mark.parametrize("fault", FAULTS)
def test_damaged_newest_checkpoint_falls_back_to_the_previous(fault, reference, tiny_model_dir,
                                                               tmp_path, capsys):
    ref, rows = reference
    out = crashed_copy(ref, tmp_path)
    name, damage, phrase = FAULTS[fault]
    damage(out / "checkpoints" / "step2" / name)
    capsys.readouterr()
    with trainer(tiny_model_dir, rows, out) as t:
        assert t.resume() is True
        assert t.step == 1
        assert t.sampler.state() == checkpoint.read_state(out / "checkpoints" / "step1")["sampler"]
        saved = load_weights(out / "checkpoints" / "step1" / GROUP)
        assert equal_weights(saved, t.groups[GROUP].model.state_dict(), same_keys=False)
    lines = stderr_lines(capsys)
    assert len(lines) == 1, lines
    assert lines[0].startswith("drmas train: checkpoint step2 (")
    assert phrase in lines[0] and "set aside as step2.unusable" in lines[0]
    assert lines[0].endswith(f"resuming from {out / 'checkpoints' / 'step1'} (step 1)")
    assert (out / "checkpoints" / "step2.unusable").is_dir()
    assert checkpoint.latest(out / "checkpoints").name == "step1"
    assert [json.loads(l)["step"] for l in (out / "metrics.jsonl").read_text().splitlines()] == [1]


def same_final(a: Path, b: Path):
    assert stripped(a / "metrics.jsonl") == stripped(b / "metrics.jsonl")
    assert equal_weights(final_weights(a, GROUP), final_weights(b, GROUP))


def test_fallback_run_ends_like_the_uninterrupted_one(reference, tiny_model_dir, tmp_path, capsys):
    ref, rows = reference
    out = crashed_copy(ref, tmp_path)
    truncate(out / "checkpoints" / "step2" / GROUP / "model.safetensors", 0)
    summary = trainer(tiny_model_dir, rows, out).run()
    assert summary["resumed_from"] == 1 and summary["steps"] == STEPS
    same_final(ref, out)
    assert checkpoint.verify(out / "final") is None


def test_damaged_final_is_written_again(reference, tiny_model_dir, tmp_path, capsys):
    ref, rows = reference
    out = tmp_path / "run"
    shutil.copytree(ref, out)
    truncate(out / "final" / GROUP / "model.safetensors")
    capsys.readouterr()
    summary = trainer(tiny_model_dir, rows, out).run()
    lines = stderr_lines(capsys)
    assert lines == [f"drmas train: {out / 'final'} is unusable ({GROUP}/model.safetensors has "
                     f"{(ref / 'final' / GROUP / 'model.safetensors').stat().st_size // 2} bytes, "
                     f"{(ref / 'final' / GROUP / 'model.safetensors').stat().st_size} were written);"
                     f" it will be written again"]
    assert summary["resumed_from"] == 2
    same_final(ref, out)


def test_no_usable_checkpoint_stops_with_one_line_naming_the_folder(reference, tiny_model_dir,
                                                                      tmp_path):
    ref, rows = reference
    out = crashed_copy(ref, tmp_path)
    truncate(out / "checkpoints" / "step2" / GROUP / "optimizer.pt")
    (out / "checkpoints" / "step1" / "trainer.json").write_text("not json")
    with pytest.raises(DrmasError) as err:
        trainer(tiny_model_dir, rows, out).run()
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"{out / 'checkpoints'}: no usable checkpoint (step2 (")
    assert "step1 (trainer.json " in msg and msg.endswith(f"move {out / 'checkpoints'} away to start afresh")
    # nothing was set aside or overwritten: the user decides
    assert sorted(p.name for p in (out / "checkpoints").iterdir() if p.is_dir()) == ["step1", "step2"]
    assert not (out / "final").exists()


def test_checkpoint_without_manifest_that_fails_to_load_falls_back(reference, tiny_model_dir,
                                                                    tmp_path, capsys):
    """A checkpoint written before manifests existed is checked by loading it."""
    ref, rows = reference
    out = crashed_copy(ref, tmp_path)
    step2 = out / "checkpoints" / "step2"
    (step2 / checkpoint.MANIFEST).unlink()
    truncate(step2 / GROUP / "model.safetensors")
    capsys.readouterr()
    with trainer(tiny_model_dir, rows, out) as t:
        assert t.resume() and t.step == 1
    [line] = stderr_lines(capsys)
    assert line.startswith("drmas train: checkpoint step2 (cannot be loaded (")


def test_manifest_lists_every_file_with_size_and_checksum(reference):
    ref, _ = reference
    for ckpt in (ref / "checkpoints" / "step1", ref / "checkpoints" / "step2", ref / "final"):
        listed = json.loads((ckpt / checkpoint.MANIFEST).read_text())["files"]
        on_disk = {p.relative_to(ckpt).as_posix() for p in ckpt.rglob("*")
                   if p.is_file() and p.name != checkpoint.MANIFEST}
        assert set(listed) == on_disk
        assert {"trainer.json", "driver_rng.pkl", f"{GROUP}/model.safetensors"} <= on_disk
        for name, want in listed.items():
            assert (ckpt / name).stat().st_size == want["size"]
        assert checkpoint.verify(ckpt) is None
    assert {f"{GROUP}/optimizer.pt", f"{GROUP}/rng_rank0.pt"} <= set(
        json.loads((ref / "checkpoints" / "step1" / checkpoint.MANIFEST).read_text())["files"])
    assert not list(ref.rglob("*.tmp")) and not list(ref.rglob("*.old"))


def test_cuda_rng_state_in_a_checkpoint_loads_on_a_cpu_machine(reference, tiny_model_dir,
                                                               tmp_path, capsys):
    """A checkpoint written on a GPU holds the device's RNG state too; a CPU-only resume
    restores the CPU states and skips it."""
    ref, rows = reference
    out = crashed_copy(ref, tmp_path)
    step2 = out / "checkpoints" / "step2"
    rng_file = step2 / GROUP / "rng_rank0.pt"
    state = torch.load(rng_file, weights_only=False)
    state["cuda"] = torch.zeros(16, dtype=torch.uint8)     # what torch.cuda.get_rng_state gives
    torch.save(state, rng_file)
    checkpoint.write_manifest(step2)
    capsys.readouterr()
    with trainer(tiny_model_dir, rows, out) as t:
        assert t.resume() and t.step == 2
        assert torch.equal(torch.get_rng_state(), state["torch"])
    assert stderr_lines(capsys) == []
