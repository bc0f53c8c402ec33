"""From an assignment to worker groups: which agents share which model.

`share: true` puts agents that name the same model into one group (one set of weights);
otherwise every agent gets its own group, even for the same base model. Under sharing the
agents' train settings must agree, since one optimiser serves them all.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from drmas.config.profile import Config, TrainConfig
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
            raise ConfigError(f"agents {other!r} and {agent!r} share model {model!r} in assignment "
                              f"{assignment!r} but differ in train setting {key!r}; make them "
                              "agree or set share: false")
    for group in groups.values():
        group["encoding"] = encoding_for(cfg, group["model"], group["settings"])
        _check_positions(cfg, group)
    return groups


def _check_positions(cfg: Config, group: dict) -> None:
    """A tiny model has a fixed number of positions: a prompt cap plus the response budget
    beyond it would crash the first long episode mid-run, so it is refused up front."""
    spec, s = cfg.models[group["model"]], group["settings"]
    if spec.kind == "tiny" and s.max_prompt_tokens is not None \
            and s.max_prompt_tokens + s.max_response_tokens > spec.max_positions:
        raise ConfigError(f"agents {', '.join(group['agents'])}: max_prompt_tokens "
                          f"{s.max_prompt_tokens} + max_response_tokens {s.max_response_tokens} "
                          f"exceed model {group['model']!r}'s max_positions {spec.max_positions}")


def encoding_for(cfg: Config, model: str, settings: TrainConfig):
    """How a group renders prompts: its model's chat-template kwargs and the prompt cap."""
    from drmas.models.encoding import PromptEncoding

    return PromptEncoding(chat_template_kwargs=dict(cfg.models[model].chat_template_kwargs),
                          max_tokens=settings.max_prompt_tokens,
                          truncation=settings.prompt_truncation)


def _first_difference(a: TrainConfig, b: TrainConfig) -> str:
    da, db = asdict(a), asdict(b)
    return next(k for k in da if da[k] != db[k])


def engine_options(cfg: Config, model: str, overrides: dict | None = None) -> dict:
    """{"engine", "dtype"} of a model: its `engine:` and `dtype:` keys under `models:`, with
    `overrides` (the same keys, from a caller such as `drmas check gpu`) over them."""
    spec = cfg.models[model]
    return {"engine": spec.engine, "dtype": spec.dtype, **(overrides or {})}


def model_dir(cfg: Config, suite: str, model: str) -> Path:
    """Where a suite's base model lives: the warm start's output (tiny models; pretrained ones
    with a `warmstart:` block), else the pretrained model's `path`."""
    if cfg.warm_started(model):
        return cfg.results / "models" / suite / model
    return Path(cfg.models[model].path)
