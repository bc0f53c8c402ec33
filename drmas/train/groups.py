"""From an assignment to worker groups: which agents share which model.

`share: true` puts agents that name the same model into one group (one set of weights);
otherwise every agent gets its own group, even for the same base model. Under sharing the
agents' train settings must agree, since one optimiser serves them all.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from drmas.config import Config, TrainConfig
from drmas.errors import ConfigError


def plan_groups(cfg: Config, assignment: str, agents: list[str]) -> dict[str, dict]:
    """{group name: {"model": model name, "agents": [...], "settings": TrainConfig}}."""
    spec = cfg.assignment(assignment)
    groups: dict[str, dict] = {}
    for agent in agents:
        model = spec.model_of(agent)
        name = model if spec.share else agent
        group = groups.setdefault(name, {"model": model, "agents": [], "settings": None})
        group["agents"].append(agent)
        settings = cfg.agent_train(agent)
        if group["settings"] is None:
            group["settings"] = settings
        elif settings != group["settings"]:
            other = group["agents"][0]
            key = _first_difference(group["settings"], settings)
            raise ConfigError(f"agents {other!r} and {agent!r} share model {model!r} but differ "
                              f"in train setting {key!r}; make them agree or set share: false")
    return groups


def _first_difference(a: TrainConfig, b: TrainConfig) -> str:
    da, db = asdict(a), asdict(b)
    return next(k for k in da if da[k] != db[k])


#: what a model runs with when the config names nothing: today's numbers on the default
#: profile (float32 RL and evaluation); `dtype: auto` picks bf16 where the hardware is fast
DEFAULT_ENGINE, DEFAULT_DTYPE = "hf", "float32"


def engine_options(cfg: Config, model: str) -> dict:
    """{"engine", "dtype"} of a model (its `engine:` and `dtype:` keys under `models:`)."""
    spec = cfg.models[model]
    return {"engine": spec.get("engine", DEFAULT_ENGINE), "dtype": spec.get("dtype", DEFAULT_DTYPE)}


def model_dir(cfg: Config, suite: str, model: str) -> Path:
    """Where the warm-started (tiny) or pretrained model of a suite lives."""
    spec = cfg.models[model]
    if spec["kind"] == "pretrained":
        return Path(spec["path"])
    return cfg.results / "models" / suite / model
