"""The typed configuration tree: a profile config (config/*.yaml) and benchmark suites
(benchmarks/*.yaml), validated against config/schema.yaml with one-line errors."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from drmas.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "config" / "schema.yaml"


@dataclass(frozen=True)
class TrainConfig:
    """RL hyper-parameters; every key can be overridden per agent under `agents:`."""

    steps: int = 24
    prompts_per_step: int = 16
    group_n: int = 8
    ppo_mini_batches: int = 2
    micro_batch_rows: int = 128
    micro_batch_tokens: int = 2048       # padded tokens per forward/backward (rows sorted by length)
    lr: float = 1e-6
    weight_decay: float = 0.01
    clip_low: float = 0.2
    clip_high: float = 0.2
    dual_clip: float = 3.0
    grad_clip: float = 1.0
    norm_by_std: bool = True
    temperature: float = 1.0
    top_p: float = 1.0
    max_response_tokens: int = 64
    save_every: int = 10
    recompute_logprobs: bool = False
    lora_rank: int = 0                 # > 0: train LoRA adapters (q/k/v/o) instead of all weights
    lora_alpha: float = 32.0


# Keys that are properties of a whole run (batch shape, schedule): one value for all agents.
RUN_KEYS = ("steps", "prompts_per_step", "group_n", "ppo_mini_batches", "save_every", "norm_by_std")


@dataclass(frozen=True)
class ResourceConfig:
    """Where worker groups run (see drmas/train/pool.py).

    `local`: every group in the trainer process, one worker each (tests, evaluation).
    `ray`: each group is `workers_per_group` Ray actors (FSDP2 when > 1) placed on one pool of
    `num_cpus` CPUs / `num_gpus` GPUs, all groups on the same devices (`colocated`, as the paper)
    or each on its own slice (`disjoint`).
    """

    backend: str = "local"
    workers_per_group: int = 1
    placement: str = "colocated"
    num_cpus: int | None = None        # None: the profile's `threads` (Snakemake's `threads:`)
    num_gpus: int | None = None        # None: every visible GPU (none on CPU)


@dataclass(frozen=True)
class EvalConfig:
    n: int = 16
    temperature: float = 0.6
    top_p: float = 0.95
    batch_size: int = 256
    max_problems_per_source: int | None = None


@dataclass(frozen=True)
class WarmstartConfig:
    steps: int = 500
    batch_size: int = 48
    lr: float = 3e-3
    mistake_rate: float = 0.3


@dataclass(frozen=True)
class Assignment:
    share: bool
    models: dict[str, str]

    def model_of(self, agent: str) -> str:
        return self.models.get(agent, self.models["default"])


@dataclass(frozen=True)
class Config:
    profile: str
    seeds: list[int]
    suites: list[str]
    methods: list[str]
    assignments: list[str]
    models: dict[str, dict]
    assignment_defs: dict[str, Assignment]
    train: TrainConfig
    eval: EvalConfig
    warmstart: WarmstartConfig = WarmstartConfig()
    tokenizer: dict = field(default_factory=lambda: {"vocab_size": 384})
    agents: dict[str, dict] = field(default_factory=dict)
    datasets: dict[str, str] = field(default_factory=dict)
    threads: int = 1
    resources: ResourceConfig = ResourceConfig()
    raw: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def results(self) -> Path:
        return Path("results") / self.profile

    def agent_train(self, agent: str) -> TrainConfig:
        """The train settings of one agent: the `train:` block with its `agents:` overrides."""
        return dataclasses.replace(self.train, **self.agents.get(agent, {}))

    def assignment(self, name: str) -> Assignment:
        if name not in self.assignment_defs:
            raise ConfigError(f"unknown assignment {name!r}; known: {', '.join(self.assignment_defs)}")
        return self.assignment_defs[name]

    def warmstart_for(self, model: str) -> WarmstartConfig:
        """The warm start of one model: the `warmstart:` block (after suite overrides) with the
        model's own `warmstart:` keys over it (a larger model may need fewer steps)."""
        return dataclasses.replace(self.warmstart, **self.models[model].get("warmstart", {}))

    def roles_of(self, model: str, agents: list[str]) -> list[str]:
        """The agents (of `agents`, in that order) that `model` plays in some configured
        assignment: a warm start teaches a model only the roles it will be asked to play."""
        return [agent for agent in agents
                if any(self.assignment(a).model_of(agent) == model for a in self.assignments)]

    def base_twin(self, assignment: str, agents: list[str]) -> str | None:
        """The first assignment (in `assignments` order, before this one) whose `agents` play
        the same base models as this one's, else None. Before RL, how agents are grouped does
        not change the policy (nonshared vs shared on one warm start): the workflow copies the
        twin's base evaluation instead of sampling the same distribution twice."""
        models = {a: [self.assignment(a).model_of(agent) for agent in agents] for a in self.assignments}
        for other in self.assignments:
            if other == assignment:
                return None
            if models[other] == models[assignment]:
                return other
        return None

    def dataset_key(self, suite: str) -> str:
        return self.datasets.get(suite, self.profile)

    def for_suite(self, suite: str) -> "Config":
        """The config a job of `suite` runs with: `suite_overrides.<suite>` merged key by key
        into `tokenizer`, `warmstart`, `train`, `eval` and `agents` (per agent). One profile can
        so give, e.g., the search suite a longer warm start than math."""
        over = (self.raw.get("suite_overrides") or {}).get(suite)
        if not over:
            return self
        raw = copy.deepcopy(self.raw)
        for key, block in over.items():
            if key == "agents":
                raw["agents"] = {a: {**raw.get("agents", {}).get(a, {}), **block.get(a, {})}
                                 for a in dict.fromkeys([*raw.get("agents", {}), *block])}
            else:
                raw[key] = {**raw.get(key, {}), **block}
        return dataclasses.replace(from_dict(raw), threads=self.threads)


def _one_line_schema_error(err) -> str:
    where = ".".join(str(p) for p in err.absolute_path) or "(top level)"
    return f"config: {where}: {err.message}"


def validate(raw: dict) -> None:
    """Check a raw config dict against config/schema.yaml; raise ConfigError on the first error."""
    import jsonschema

    schema = yaml.safe_load(SCHEMA.read_text())
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(raw),
                    key=lambda e: list(e.absolute_path))
    if errors:
        raise ConfigError(_one_line_schema_error(errors[0]))
    res = raw.get("resources", {})
    if res.get("backend", "local") == "local" and res.get("workers_per_group", 1) > 1:
        raise ConfigError("config: resources.workers_per_group > 1 needs resources.backend: ray")
    for name in raw["assignments"]:
        if name not in raw["assignment_defs"]:
            raise ConfigError(f"config: assignments: {name!r} is not defined in assignment_defs")
    for name, spec in raw["assignment_defs"].items():
        for agent, model in spec["models"].items():
            if model not in raw["models"]:
                raise ConfigError(f"config: assignment_defs.{name}.models.{agent}: "
                                  f"unknown model {model!r}; known: {', '.join(raw['models'])}")


def from_dict(raw: dict) -> Config:
    validate(raw)
    known = {f.name for f in fields(Config)} - {"raw"}
    kwargs: dict[str, Any] = {k: v for k, v in raw.items() if k in known}
    kwargs["train"] = TrainConfig(**raw["train"])
    kwargs["eval"] = EvalConfig(**raw["eval"])
    kwargs["warmstart"] = WarmstartConfig(**raw.get("warmstart", {}))
    kwargs["resources"] = ResourceConfig(**raw.get("resources", {}))
    kwargs["assignment_defs"] = {k: Assignment(v["share"], dict(v["models"]))
                                 for k, v in raw["assignment_defs"].items()}
    return Config(**kwargs, raw=raw)


def load(path: str | Path) -> Config:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return from_dict(raw)


@dataclass(frozen=True)
class Suite:
    """A benchmark suite (benchmarks/<name>.yaml): data, MAS, reward and metrics."""

    name: str
    mas: str
    agents: list[str]
    reward: str
    invalid_penalty: float
    datasets: dict[str, dict]
    max_loop: int = 2
    max_turns: int = 4
    topk: int = 3
    metrics: dict = field(default_factory=lambda: {"n": 16})
    title: str = ""
    retrieval: bool = False        # the MAS searches an index (built by rules/index.smk)

    def data_spec(self, key: str) -> dict:
        if key not in self.datasets:
            raise ConfigError(f"benchmark {self.name!r} has no datasets entry {key!r}; "
                              f"known: {', '.join(self.datasets)}")
        return self.datasets[key]


SUITE_KEYS = {f.name for f in fields(Suite)}


def load_suite(path: str | Path) -> Suite:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"benchmark file not found: {path}")
    raw = yaml.safe_load(path.read_text()) or {}
    unknown = set(raw) - SUITE_KEYS
    if unknown:
        raise ConfigError(f"{path}: unknown keys {sorted(unknown)}; known: {sorted(SUITE_KEYS)}")
    missing = {"name", "mas", "agents", "reward", "invalid_penalty", "datasets"} - set(raw)
    if missing:
        raise ConfigError(f"{path}: missing keys {sorted(missing)}")
    from drmas.agents.registry import get_orchestra

    roles = get_orchestra(raw["mas"]).agents
    for agent in raw["agents"]:
        if agent not in roles:
            raise ConfigError(f"{path}: unknown agent {agent!r} for MAS {raw['mas']!r}; "
                              f"known: {', '.join(roles)}")
    return Suite(**raw)


def suite_path(name: str, root: str | Path = "benchmarks") -> Path:
    return Path(root) / f"{name}.yaml"
