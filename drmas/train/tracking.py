"""Experiment tracking: where a run's per-step metrics go besides `metrics.jsonl`.

The profile's `tracking:` list picks the trackers: `tensorboard` (the default; event files in
`<run>/tensorboard/`), `wandb` (Weights & Biases, offline by default: `<run>/wandb/`, synced
later with `wandb sync`; set WANDB_MODE=online to log live) and `mlflow` (MLflow's file
store `<run>/mlruns/` unless MLFLOW_TRACKING_URI names a server). All get the same scalars
under the same names, the key paths of a metrics line (`agents/solver/grad_norm`,
`team_reward/mean`, ...), at the run's step. wandb and mlflow are optional (`pip install -e
".[tracking]"`); naming one that is not installed is a one-line error before training.

`Trackers` has SummaryWriter's `add_scalar` / `flush` / `close`, so the trainer logs to all
of them as it logged to TensorBoard.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from drmas.errors import ConfigError

KINDS = ("tensorboard", "wandb", "mlflow")
EXTRA = 'pip install -e ".[tracking]"'


class _Wandb:
    def __init__(self, out: Path, name: str, config: dict):
        import wandb

        os.environ.setdefault("WANDB_MODE", "offline")
        os.environ.setdefault("WANDB_SILENT", "true")
        shutil.rmtree(out / "wandb", ignore_errors=True)
        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT", "drmas"), name=name,
                              dir=str(out), config=config, reinit="create_new")
        self.pending: dict[int, dict] = {}

    def add_scalar(self, tag, value, step):
        self.pending.setdefault(int(step), {})[tag] = value

    def flush(self):
        for step in sorted(self.pending):
            self.run.log(self.pending[step], step=step)
        self.pending.clear()

    def close(self):
        self.flush()
        self.run.finish()


class _Mlflow:
    def __init__(self, out: Path, name: str, config: dict):
        from mlflow.tracking import MlflowClient

        uri = os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:
            # MLflow 3 keeps its file store behind this switch ("maintenance mode"); a run
            # folder's own store needs no server or database
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
            shutil.rmtree(out / "mlruns", ignore_errors=True)
            uri = (out / "mlruns").resolve().as_uri()
        self.client = MlflowClient(tracking_uri=uri)
        experiment = os.environ.get("MLFLOW_EXPERIMENT_NAME", "drmas")
        found = self.client.get_experiment_by_name(experiment)
        exp_id = found.experiment_id if found else self.client.create_experiment(experiment)
        self.run_id = self.client.create_run(exp_id, run_name=name).info.run_id
        for key, value in _flat_params(config):
            self.client.log_param(self.run_id, key, value)
        self.pending: list = []

    def add_scalar(self, tag, value, step):
        from mlflow.entities import Metric

        self.pending.append(Metric(tag, float(value), 0, int(step)))

    def flush(self):
        if self.pending:
            self.client.log_batch(self.run_id, metrics=self.pending)
            self.pending = []

    def close(self):
        self.flush()
        self.client.set_terminated(self.run_id)


def _flat_params(config: dict, prefix: str = ""):
    for key, value in config.items():
        if isinstance(value, dict):
            yield from _flat_params(value, f"{prefix}{key}.")
        else:
            yield prefix + key, str(value)[:500]


class Trackers:
    """Every tracker of `kinds`, behind SummaryWriter's interface."""

    def __init__(self, kinds, out: Path, name: str, config: dict | None = None,
                 tensorboard=None):
        check(kinds)
        self.writers = []
        if "tensorboard" in kinds:
            if tensorboard is None:
                from torch.utils.tensorboard import SummaryWriter

                shutil.rmtree(out / "tensorboard", ignore_errors=True)
                tensorboard = SummaryWriter(str(out / "tensorboard"))
            self.writers.append(tensorboard)
        if "wandb" in kinds:
            self.writers.append(_Wandb(out, name, config or {}))
        if "mlflow" in kinds:
            self.writers.append(_Mlflow(out, name, config or {}))

    def add_scalar(self, tag, value, step):
        for w in self.writers:
            w.add_scalar(tag, value, step)

    def flush(self):
        for w in self.writers:
            w.flush()

    def close(self):
        for w in self.writers:
            w.close()


def check(kinds) -> None:
    """A one-line error for an unknown tracker or one whose package is not installed."""
    import importlib.util

    for kind in kinds:
        if kind not in KINDS:
            raise ConfigError(f"tracking: {kind!r} is not one of {', '.join(KINDS)}")
        if kind != "tensorboard" and importlib.util.find_spec(kind) is None:
            raise ConfigError(f"tracking: {kind} is not installed ({EXTRA})")
