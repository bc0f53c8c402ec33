"""What each workflow stage reads from the configuration: one key per job.

A job's key is the slice of the resolved configuration that can change its output, as plain
JSON data. The Snakefile hands each rule its key as a `params:` entry, so Snakemake reruns a
job exactly when its key changes (its "params" rerun trigger), and the trainer records the
train key's hash as the run's identity: checkpoints and final weights of another
configuration are never reused. Keys name only what the job reads: adding a seed, a method
or an evaluation setting leaves data preparation and warm starts alone. See ARCHITECTURE.md,
"Reruns".

Machine settings (threads, `resources:`) are not part of any key: they decide where a job
runs, so a run may resume on another backend or cluster. They can still change what it
computes: beyond float rounding, a group of W > 1 workers draws its samples with one seed per
rank (`RayGroup.generate`), so another `workers_per_group` draws other samples from then on.
Under `loss_aggregation: verl` or `balance_batch` the worker count is part of a run's key,
because verl's token-mean weighs rows by their micro-batch on each device and balancing deals
the rows to the devices. `cpu_kernels` is part of the
warm-start, train and evaluation keys when pinned (not `native`): the kernels are a choice
of the experiment's arithmetic, like a model's dtype.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

from drmas.config.profile import Config
from drmas.config.schema import plain
from drmas.config.suites import Suite, mas_options


def digest(key: Any) -> str:
    """A short stable hash of a key (canonical JSON)."""
    text = json.dumps(key, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def as_param(key: Any) -> str:
    """A key as one canonical JSON string (what a rule's `params:` holds)."""
    return json.dumps(key, sort_keys=True, separators=(",", ":"), default=str)


def prepare_key(cfg: Config, suite: Suite) -> dict:
    return {"datasets": suite.data_spec(cfg.dataset_key(suite.name)), "generator_seed": 0}


def index_key(cfg: Config) -> dict:
    """A search index depends on its corpus (an input file) and on how it encodes it."""
    r = cfg.retrieval
    return {"kind": r.kind} if r.kind == "bm25" else {"kind": r.kind, "encoder": r.encoder,
                                                      "max_length": r.max_length}


#: The loop limits every suite's key held while they were keys of every benchmark file, at
#: their defaults. A MAS's own options (`MasOptions.key`) replace those of them it has: the
#: keys of existing runs stay as they were, so nothing reruns that did not change.
FORMER_SUITE_KEYS = {"max_loop": 2, "max_turns": 4, "topk": 3}


def mas_key(cfg: Config, suite: Suite) -> dict:
    """What shapes the suite's episodes: its MAS keys and its MAS's options (the benchmark
    file's `mas_options` with the profile's over them), so that changing an option reruns
    the jobs of the suites whose MAS has it, and only those."""
    return {**FORMER_SUITE_KEYS, **suite.mas_keys(), **mas_options(cfg, suite).key()}


def tokenizer_key(cfg: Config, suite: Suite) -> dict:
    """The tokenizer is trained on the demonstrations' text (their prompts and mistakes)."""
    c = cfg.for_suite(suite.name)
    return {"tokenizer": plain(c.tokenizer), "mistake_rate": c.warmstart.mistake_rate,
            "mas": mas_key(c, suite)}


def kernels_key(cfg: Config) -> dict:
    """The CPU kernels, when pinned: on a CPU with AVX-512 they change every float32 result
    (drmas/models/kernels.py). `native` adds nothing, so that earlier runs keep their key."""
    return {} if cfg.cpu_kernels == "native" else {"cpu_kernels": cfg.cpu_kernels}


def _without_later(key: dict, later: dict) -> dict:
    """`key` without the keys of `later` ({key: the value before it existed}) at that value,
    so that what was made before a key existed keeps its identity until the key is set."""
    return {k: v for k, v in key.items() if k not in later or v != later[k]}


#: Warm-start keys added after models had been warm-started, each with the value that leaves
#: a warm start as it was (`_without_later`).
LATER_WARMSTART_KEYS = {"seed": 0}


def warmstart_key(cfg: Config, suite: Suite, model: str) -> dict:
    c = cfg.for_suite(suite.name)
    warmstart = _without_later(plain(c.warmstart_for(model)), LATER_WARMSTART_KEYS)
    return {"model": plain(c.models[model]), "warmstart": warmstart,
            "roles": c.roles_of(model, suite.agents), "mas": mas_key(c, suite),
            **kernels_key(c)}


def _models_of(cfg: Config, suite: Suite, assignment: str) -> dict:
    spec = cfg.assignment(assignment)
    names = sorted({spec.model_of(a) for a in suite.agents})
    return {"share": spec.share, "agent_models": {a: spec.model_of(a) for a in suite.agents},
            "models": {m: plain(cfg.models[m]) for m in names}}


#: Train keys added after runs had been made, each with the value that leaves a run as it
#: was: at that value a key is left out of the run's key, so that existing runs keep their
#: identity (and resume from their checkpoints) until the key is set.
LATER_TRAIN_KEYS = {"pad_group_rows_to": 0, "balance_batch": False}


def _agent_train_key(cfg: Config, agent: str) -> dict:
    key = plain(cfg.agent_train(agent))
    return _without_later(key, LATER_TRAIN_KEYS)


def train_key(cfg: Config, suite: Suite, assignment: str, method: str, seed: int) -> dict:
    """A run's identity: everything that decides which weights it ends with. For
    warm-started models (tiny ones; pretrained ones with a `warmstart:` block) the warm-start
    key is part of it (other warm-start weights, another run)."""
    c = cfg.for_suite(suite.name).for_method(method)
    key = {"suite": suite.name, "assignment": assignment, "method": method,
           "estimator": c.method(method).estimator, "seed": int(seed),
           "prompt_set": c.prompt_set, "mas": mas_key(c, suite), **_models_of(c, suite, assignment),
           "train": {a: _agent_train_key(c, a) for a in suite.agents}, **kernels_key(c)}
    key["warmstart"] = {m: warmstart_key(cfg, suite, m)["warmstart"]
                        for m in key["models"] if c.warm_started(m)}
    if any(key["train"][a]["loss_aggregation"] == "verl" for a in suite.agents) \
            or c.train.balance_batch:
        # verl's token-mean weighs a row by its micro-batch on its device, as upstream does
        # (algos/loss.py, verl_row_denominators), and balance_batch deals the rows to the
        # devices: the worker count is then part of the result
        key["workers_per_group"] = c.resources.workers_per_group
    return key


def eval_key(cfg: Config, suite: Suite, assignment: str, method: str, seed: int) -> dict:
    """What an evaluation reads besides its inputs' files: sampling settings, the problems
    cap, each agent's response budget, the MAS; for base rows, the models."""
    c = cfg.for_suite(suite.name)
    if method != "base":
        c = c.for_method(method)
    key = {"eval": plain(c.eval), "seed": int(seed), "mas": mas_key(c, suite),
           "prompt_set": c.prompt_set,
           "max_response_tokens": {a: c.agent_train(a).max_response_tokens for a in suite.agents},
           "datasets": suite.data_spec(cfg.dataset_key(suite.name)), **kernels_key(c)}
    if method == "base":
        key.update(_models_of(c, suite, assignment))
    return key


def report_key(cfg: Config, suite: Suite) -> dict:
    """Tables and figures name the profile, the suite's title and the configured order, and
    depend on the spike rule and the bootstrap size."""
    return {"profile": cfg.profile, "title": suite.title, "assignments": cfg.assignments,
            "methods": {m: cfg.label_of(m) for m in cfg.methods}, "seeds": cfg.seeds,
            "report": dataclasses.asdict(cfg.report)}


def changed_keys(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Dotted paths where two keys differ (for a one-line "what changed" message)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in dict.fromkeys([*old, *new]):
            out += changed_keys(old.get(k), new.get(k), f"{prefix}{k}.")
        return out
    return [] if old == new else [prefix.rstrip(".") or "(all)"]
