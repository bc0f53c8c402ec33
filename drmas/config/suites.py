"""Benchmark suites (benchmarks/<name>.yaml): data, MAS, reward; validated against a schema
generated from `Suite`, like a profile (ARCHITECTURE.md, "How to add a MAS / a benchmark")."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from drmas.config.layers import read_mapping
from drmas.config.schema import NAMES, coerce, dataclass_schema, opt, validate
from drmas.errors import ConfigError

if TYPE_CHECKING:
    from drmas.config.profile import Config

POS = {"minimum": 1}


@dataclass(frozen=True)
class Suite:
    """A benchmark suite (benchmarks/<name>.yaml): data, MAS, reward."""

    name: str = opt(help="suite name (the file's stem); tables and figures are named after it", pattern="^[A-Za-z0-9_-]+$")
    mas: str = opt(help="the multi-agent system (a folder of drmas/mas/, registered as a MAS)")
    agents: list[str] = opt(help="the MAS's agents that take part, in its order", minItems=1, **NAMES)
    reward: str = opt(help="team reward function (registered in drmas/rewards)")
    invalid_penalty: float = opt(help="subtracted from a row's score when its output breaks the format", minimum=0, maximum=1)
    datasets: dict[str, dict] = opt(help="data per profile name: `kind: generated` (a seeded generator) or `kind: hub` (see benchmarks/)",
                                    additionalProperties={"type": "object", "required": ["kind"],
                                                          "properties": {"kind": {"enum": ["generated", "hub"]}}})
    title: str = opt("", "title of the suite's tables and figures")
    mas_options: dict = opt(factory=dict, help="the MAS's own options, checked by the MAS (its options_class, drmas/mas/<mas>/)")
    retrieval: bool = opt(False, "the MAS searches an index (built by rules/index.smk)")

    def data_spec(self, key: str) -> dict:
        if key not in self.datasets:
            raise ConfigError(f"benchmark {self.name!r} has no datasets entry {key!r}; "
                              f"known: {', '.join(self.datasets)}")
        return self.datasets[key]

    def mas_keys(self) -> dict:
        """Everything about the suite that shapes an episode and its reward (not its data),
        but its MAS's options (`mas_options`, which take the profile's into account)."""
        return {k: getattr(self, k) for k in ("mas", "agents", "reward", "invalid_penalty",
                                               "retrieval")}


def suite_schema() -> dict:
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "drmas benchmark suite",
            "description": "Generated from drmas/config/suites.py (Suite); do not edit.",
            **dataclass_schema(Suite)}


def load_suite(path: str | Path) -> Suite:
    """A benchmark file, validated against the suite schema and its MAS's agents."""
    path = Path(path)
    raw = coerce(read_mapping(path, "benchmark file"), suite_schema())
    validate(raw, suite_schema(), what=str(path))
    from drmas.registry import MAS

    from drmas.data.prepare import check_names
    from drmas.registry import REWARDS

    for key, registry in (("mas", MAS), ("reward", REWARDS)):
        if raw[key] not in registry:
            raise ConfigError(f"{path}: {key}: unknown {registry.kind} {raw[key]!r}; "
                              f"known: {', '.join(registry.names())}")
    orchestra = MAS.get(raw["mas"])
    orchestra.options_class.parse(raw.get("mas_options"), str(path), mas=raw["mas"])
    roles = orchestra.agents
    for agent in raw["agents"]:
        if agent not in roles:
            raise ConfigError(f"{path}: agents: unknown agent {agent!r} for MAS {raw['mas']!r}; "
                              f"known: {', '.join(roles)}")
    for key, spec in raw["datasets"].items():
        check_names(spec, f"{path}: datasets.{key}")
    return Suite(**raw)


def suite_path(name: str, root: str | Path = "benchmarks") -> Path:
    return Path(root) / f"{name}.yaml"


def mas_options(cfg: "Config | None", suite: Suite):
    """The options of the suite's MAS (an instance of its `options_class`): the benchmark
    file's `mas_options:`, with the profile's `mas_options.<mas>` over them key by key. The one
    path by which options reach the orchestra (`drmas.rollout.mas.build_orchestra`), the
    warm-start demonstrations and the stage keys (`drmas.config.stages.mas_key`)."""
    import json

    from drmas.registry import MAS

    cls = MAS.get(suite.mas).options_class
    over = (cfg.mas_options.get(suite.mas) if cfg is not None else None) or {}
    memo = (cls, suite.name, json.dumps([suite.mas_options, over], sort_keys=True, default=str))
    if memo not in _OPTIONS:          # every stage key asks: validate each block once
        if over:
            cls.parse(over, "config", f"mas_options.{suite.mas}", mas=suite.mas)
        _OPTIONS[memo] = cls.parse({**suite.mas_options, **over}, f"suite {suite.name}",
                                   mas=suite.mas)
    return _OPTIONS[memo]


_OPTIONS: dict = {}       # (options class, suite, blocks) -> options (frozen, so shared)


def check_mas_options(cfg: "Config") -> None:
    """The profile's `mas_options` blocks name a MAS and only options it has, with valid
    values (a typo would otherwise be ignored)."""
    from drmas.registry import MAS

    for name, block in cfg.mas_options.items():
        if name not in MAS:
            raise ConfigError(f"config: mas_options.{name}: unknown MAS {name!r}; "
                              f"known: {', '.join(MAS.names())}")
        MAS.get(name).options_class.parse(block, "config", f"mas_options.{name}", mas=name)


def _agent_blocks(cfg: "Config", train: bool = True, models: bool = True) -> list[tuple[str, dict]]:
    """(where, block) of every block keyed by agent name: the profile's per-agent train keys,
    each suite override's (`train`), and each assignment's agent -> model map, `default`
    aside (`models`)."""
    blocks = []
    if train:
        blocks += [("agents", cfg.agents)] + [(f"suite_overrides.{s}.agents", o.agents)
                                              for s, o in cfg.suite_overrides.items()]
    if models:
        blocks += [(f"assignment_defs.{name}.models", {a: m for a, m in spec.models.items()
                                                       if a != "default"})
                   for name, spec in cfg.assignment_defs.items()]
    return blocks


def _check_known_agents(blocks) -> None:
    """Every agent name of `blocks` is an agent of some registered MAS."""
    from drmas.registry import MAS

    known = {agent for name in MAS.names() for agent in MAS.get(name).agents}
    for where, block in blocks:
        for agent in block:
            if agent not in known:
                raise ConfigError(f"config: {where}.{agent}: no MAS has an agent {agent!r}; "
                                  f"known: {', '.join(sorted(known))}")


def check_agents_exist(cfg: "Config") -> None:
    """Per-agent blocks name agents that some MAS has (a typo would otherwise be ignored),
    and `mas_options` blocks name a MAS and its options.
    For a single `drmas` command, which has no list of suites; the workflow checks the
    stricter `check_suites` (agents of a configured suite)."""
    check_mas_options(cfg)
    _check_known_agents(_agent_blocks(cfg))


def check_suites(cfg: "Config", suites: dict[str, Suite], benchmarks: str | Path = "benchmarks") -> None:
    """Checks that need the suites: per-agent train blocks name agents of a configured suite,
    every `suite_overrides` entry names a benchmark that exists, and `mas_options` blocks
    name a MAS and its options. An assignment's agent -> model map names agents of any MAS:
    one assignment serves every suite (the default profile's `hetero` names the math Solver
    and the search Answerer), so `--config 'suites=[math]'` leaves its Answerer unused, not
    wrong; a name no MAS has (a typo) is refused."""
    check_mas_options(cfg)
    _check_known_agents(_agent_blocks(cfg, train=False))
    agents = {a for s in suites.values() for a in s.agents}
    for where, block in _agent_blocks(cfg, models=False):
        for agent in block:
            if agent not in agents:
                raise ConfigError(f"config: {where}.{agent}: no configured suite has an agent "
                                  f"{agent!r}; agents: {', '.join(sorted(agents))}")
    for name in cfg.suite_overrides:
        if name not in suites and not suite_path(name, benchmarks).is_file():
            raise ConfigError(f"config: suite_overrides.{name}: no benchmark {name!r} "
                              f"({suite_path(name, benchmarks)} not found)")
    from drmas.config.groups import plan_groups
    from drmas.registry import MAS

    for name, suite in suites.items():
        known = MAS.get(suite.mas).prompt_sets
        if cfg.prompt_set not in known:
            raise ConfigError(f"config: prompt_set: MAS {suite.mas!r} (suite {name!r}) has no "
                              f"prompt set {cfg.prompt_set!r}; known: {', '.join(sorted(known))}")
    for name, suite in suites.items():        # agents sharing a model must agree on settings
        suite.data_spec(cfg.dataset_key(name))
        scfg = cfg.for_suite(name)
        for assignment in scfg.assignments:
            for method in scfg.methods:
                plan_groups(scfg.for_method(method), assignment, suite.agents)
