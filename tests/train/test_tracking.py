"""Experiment tracking (drmas/train/tracking.py): W&B in offline mode and MLflow's file store
get every scalar of metrics.jsonl under TensorBoard's names; each test skips cleanly when its
extra (`pip install -e ".[tracking]"`) is absent."""

import dataclasses
import json

import pytest

from conftest import make_config
from drmas.errors import ConfigError
from drmas.train import tracking
from training import make_trainer

STEPS = 2


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)


def mlflow_history(out, tag):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=(out / "mlruns").resolve().as_uri())
    (run,) = client.search_runs([client.get_experiment_by_name("drmas").experiment_id])
    return [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, tag)]


def wandb_history(out) -> dict[str, list]:
    """{key: values in step order} of the offline run's history records, read from its run
    file (what `wandb sync` would upload): W&B's record log (LevelDB's log format: 32 KiB
    blocks of chunks with a 7-byte header) of protobuf `Record`s."""
    from wandb.proto import wandb_internal_pb2 as pb

    (run,) = list((out / "wandb").glob("offline-run-*/run-*.wandb"))
    data = run.read_bytes()
    chunks, pos, buf = [], 7, b""              # 7: the file header (":W&B", magic, version)
    while pos + 7 <= len(data):
        if 32768 - pos % 32768 < 7:            # a block's tail too short for a header
            pos += 32768 - pos % 32768
            continue
        length, kind = int.from_bytes(data[pos + 4:pos + 6], "little"), data[pos + 6]
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        buf = chunk if kind in (1, 2) else buf + chunk
        if kind in (1, 4):                     # full, or the last of first/middle/last
            chunks.append(buf)
    history: dict[str, list] = {}
    for raw in chunks:
        record = pb.Record()
        record.ParseFromString(raw)
        if record.WhichOneof("record_type") == "history":
            for item in record.history.item:
                key = item.key or "/".join(item.nested_key)
                if not key.startswith("_"):
                    history.setdefault(key, []).append(json.loads(item.value_json))
    return history


def test_unknown_or_missing_tracker_is_one_line(monkeypatch):
    with pytest.raises(ConfigError, match="not one of"):
        tracking.check(["neptune"])
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(ConfigError, match=r"wandb is not installed \(pip install"):
        tracking.check(["tensorboard", "wandb"])


def test_mlflow_file_store(tmp_path, offline):
    pytest.importorskip("mlflow")
    board = tracking.Trackers(["mlflow"], tmp_path, "math/shared/grpo/seed0", {"train": {"lr": 1e-3}})
    for step in (1, 2):
        board.add_scalar("agents/solver/grad_norm", 0.5 * step, step)
        board.flush()
    board.close()
    assert mlflow_history(tmp_path, "agents/solver/grad_norm") == [(1, 0.5), (2, 1.0)]


def test_wandb_offline(tmp_path, offline):
    pytest.importorskip("wandb")
    board = tracking.Trackers(["wandb"], tmp_path, "math/shared/grpo/seed0", {"seed": 0})
    for step in (1, 2):
        board.add_scalar("agents/solver/grad_norm", 0.5 * step, step)
        board.add_scalar("team_reward/mean", 0.1, step)
        board.flush()
    board.close()
    history = wandb_history(tmp_path)
    assert history["agents/solver/grad_norm"] == [0.5, 1.0]
    assert history["team_reward/mean"] == [0.1, 0.1]


def test_a_small_run_logs_to_every_tracker_under_tensorboards_names(tiny_model_dir, math_rows,
                                                                   tmp_path, offline):
    pytest.importorskip("wandb")
    pytest.importorskip("mlflow")
    cfg = make_config(tiny_model_dir, steps=STEPS)
    cfg = dataclasses.replace(cfg, tracking=["tensorboard", "wandb", "mlflow"])
    out = tmp_path / "run"
    rows = [r for r in math_rows if r["split"] == "train"]
    make_trainer(cfg, rows, out, "nonshared", "drmas").run()
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) == STEPS
    assert any((out / "tensorboard").iterdir())
    solver = "agents/solver/grad_norm"
    assert [s for s, _ in mlflow_history(out, solver)] == list(range(1, STEPS + 1))
    assert mlflow_history(out, solver)[-1][1] == pytest.approx(lines[-1]["agents"]["solver"]["grad_norm"])
    history = wandb_history(out)
    assert history[solver] == pytest.approx([m["agents"]["solver"]["grad_norm"] for m in lines])
    assert history["team_reward/mean"] == pytest.approx([m["team_reward"]["mean"] for m in lines])
