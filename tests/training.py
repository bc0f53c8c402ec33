"""Training runs on the tiny fixture model: the reward that gives a random model's answers
variance, one Trainer factory, a worker group of two Ray workers, and what two runs are
compared by (metrics.jsonl without its timings, saved safetensors weights)."""

import json
from contextlib import contextmanager
from pathlib import Path

import torch
from safetensors.torch import load_file

from conftest import math_suite
from drmas.train.trainer import VOLATILE, Trainer


def odd_length_reward(answer, golds):
    """A reward with variance on a random model, so advantages are non-zero."""
    return float(len(answer) % 2)


def make_trainer(cfg, rows, out, assignment="shared", method="grpo", *, suite=None,
                 reward=odd_length_reward, **kwargs) -> Trainer:
    """Trainer(cfg, suite or math_suite(), assignment, method, seed 0, rows, out, **kwargs)
    that scores answers with `reward` (None: the suite's own reward)."""
    trainer = Trainer(cfg, suite if suite is not None else math_suite(), assignment, method, 0,
                      rows, out, **kwargs)
    if reward is not None:
        trainer.reward = reward
    return trainer


def run_trained(cfg, rows, out, assignment="nonshared", method="drmas", **kwargs):
    """(trainer, summary) of one whole run of `make_trainer(cfg, rows, out, ...)`."""
    trainer = make_trainer(cfg, rows, out, assignment, method, **kwargs)
    return trainer, trainer.run()


@contextmanager
def two_worker_group(model_dir, agents, settings):
    """Group "g" of `agents` on `model_dir` with W = 2 Ray workers (FSDP2; Ray must be
    running); its groups and pool are closed on exit."""
    from drmas.config.profile import ResourceConfig
    from drmas.train.pool import make_groups

    groups, pool = make_groups({"g": {"agents": agents, "settings": settings}}, {"g": model_dir},
                               ResourceConfig(backend="ray", workers_per_group=2, num_cpus=2), 1)
    try:
        yield groups["g"]
    finally:
        for g in groups.values():
            g.close()
        pool.shutdown()


def stripped(path):
    """The records of a metrics.jsonl without their VOLATILE (timing, memory) keys."""
    return [{k: v for k, v in json.loads(l).items() if k not in VOLATILE}
            for l in Path(path).read_text().splitlines()]


def load_weights(folder) -> dict:
    """{name: tensor} of the model.safetensors in `folder` (a group's checkpoint folder)."""
    return load_file(str(Path(folder) / "model.safetensors"))


def final_weights(run, group="small") -> dict:
    """The final weights of `group` in the run folder `run`."""
    return load_weights(Path(run) / "final" / group)


def equal_weights(a: dict, b: dict, same_keys: bool = True) -> bool:
    """Every tensor of `a` equals (torch.equal) b's under its name; with `same_keys`, b also
    holds no other names."""
    return (not same_keys or a.keys() == b.keys()) and all(torch.equal(a[k], b[k]) for k in a)
