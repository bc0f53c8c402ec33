"""What every agent and orchestra shares: chat prompts in, parsed actions out.

An agent never calls a model itself. The orchestra asks an `act` callable for a batch of
completions (`act(agent_name, list_of_chat_prompts) -> list_of_generations`), which lets the
trainer route each agent to its worker group, batch all episodes' calls to one agent into one
generate call, and lets tests drive an orchestra with scripted agents.

An agent owns its extraction rule (which tag it acts on, how it is read: the same under every
prompt set, as in the paper's code); its prompt text and the output format it is asked for
come from the MAS's prompt set (`drmas/mas/prompting.py`).

An orchestra (`Orchestra`) is a MAS's control flow; it owns its options (`MasOptions`), read
from a benchmark file's `mas_options:` block and validated by the MAS itself, so that a new
MAS with options of its own changes no file outside its folder (ARCHITECTURE.md, "How to add
a MAS").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Collection, Mapping, Protocol, Sequence

from drmas.config.schema import coerce, dataclass_schema, plain, validate
from drmas.errors import ConfigError

Messages = list[dict[str, str]]


class Generation(Protocol):
    """Anything with the generated text; engines add token ids and logprobs."""

    text: str


Act = Callable[[str, Sequence[Messages]], Sequence[Any]]


@dataclass
class Action:
    """A parsed agent output: `value` is what the agent's tag says (None: no tag), `valid`
    whether the output has the format its prompt asked for (invalid rows get a penalty)."""

    value: str | None
    valid: bool


@dataclass
class Turn:
    """One agent call inside an episode; it becomes one training row."""

    agent: str
    turn: int
    prompt: Messages
    gen: Any                       # the engine's Generation (text, ids, logprobs)
    action: Action


@dataclass
class Episode:
    """One rollout of the MAS on one problem; `answer` is the text the reward is computed on."""

    problem: dict
    turns: list[Turn] = field(default_factory=list)
    answer: str = ""
    done: bool = False
    info: dict = field(default_factory=dict)


class Agent:
    """A role of a MAS: prompted through a prompt set, parsed by its own extraction rule.

    `name` is the role's key in configs and rows; `role` is how the paper's prompts name it
    to its teammates ("Solver Agent").
    """

    name: str = ""
    role: str = ""

    def __init__(self, prompts):
        self.prompts = prompts

    def prompt(self, episode: Episode) -> Messages:
        return self.prompts.messages(self.name, episode)

    def parse(self, text: str) -> Action:
        raise NotImplementedError

    def format_ok(self, text: str) -> bool:
        """Whether `text` has the output format this agent's prompt set asks for."""
        return self.prompts.format_ok(self.name, text)


def call(act: Act, agent: Agent, episodes: list[Episode], turn: int) -> list[Action]:
    """Ask `agent` once in each episode (one batched `act` call); record the turns."""
    if not episodes:
        return []
    prompts = [agent.prompt(ep) for ep in episodes]
    gens = act(agent.name, prompts)
    if len(gens) != len(prompts):
        raise RuntimeError(f"act returned {len(gens)} generations for {len(prompts)} prompts")
    actions = []
    for ep, prompt, gen in zip(episodes, prompts, gens):
        action = agent.parse(gen.text)
        ep.turns.append(Turn(agent.name, turn, prompt, gen, action))
        actions.append(action)
    return actions


def _validate(value, schema: dict, what: str) -> None:
    """`drmas.config.schema.validate`, where jsonschema is installed. It is a dependency of the
    package, but `drmas check gpu` runs from a bare source checkout on GPU machines without it
    (docs/operations.md), with options it builds itself; there the options are not validated."""
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        return
    validate(value, schema, what=what)


@dataclass(frozen=True)
class MasOptions:
    """A MAS's own options: subclass it as a frozen dataclass whose fields are declared with
    `drmas.config.schema.opt` (default, one line of help, JSON-Schema constraints such as
    `minimum`), like the profile's keys. A benchmark file sets them in `mas_options:`, a
    profile may override them per MAS (`mas_options.<mas>`); `drmas.config.suites.mas_options`
    reads both through `parse`, and the orchestra, its warm-start demonstrations and the stage
    keys all get that one instance."""

    def __post_init__(self):
        _validate(plain(self), self.schema(), what=type(self).__name__)

    @classmethod
    def schema(cls) -> dict:
        """The JSON-Schema of the options (every field, its default and help)."""
        return dataclass_schema(cls)

    @classmethod
    def parse(cls, raw: Any, what: str, where: str = "mas_options", mas: str | None = None):
        """The options of a `mas_options:` block; one-line ConfigErrors `what: where.key: ...`
        for a block that is no mapping, an unknown option or a wrong value."""
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise ConfigError(f"{what}: {where}: expected a mapping of options, got {raw!r}")
        schema = cls.schema()
        known = list(schema["properties"])
        for key in raw:
            if key not in known:
                owner = f" of MAS {mas!r}" if mas else ""
                raise ConfigError(f"{what}: {where}.{key}: unknown option{owner}; "
                                  f"known: {', '.join(known) or 'none'}")
        raw = coerce(raw, schema)
        wrapped, wrapped_schema = raw, schema
        for part in reversed(where.split(".")):    # errors name the whole dotted path
            wrapped = {part: wrapped}
            wrapped_schema = {"type": "object", "properties": {part: wrapped_schema}}
        _validate(wrapped, wrapped_schema, what=what)
        return cls(**raw)

    def key(self) -> dict:
        """The options' entries in the stage keys of the jobs that run the MAS
        (drmas/config/stages.py, `mas_key`): a changed option reruns exactly those jobs."""
        return plain(self)


@dataclass(frozen=True)
class NoOptions(MasOptions):
    """The options of a MAS that has none (an empty `mas_options:` block)."""


class Orchestra(Protocol):
    """A MAS's control flow, registered in `drmas.registry.MAS` under its name (a benchmark
    file's `mas:`). `drmas.rollout.mas.build_orchestra` builds it as
    `cls(options, prompt_set=..., retriever=...)` (`options`: an instance of its
    `options_class`; `retriever`: None unless the suite searches); the trainer and the
    evaluator then call `run`, and the report reads the class attributes."""

    agents: ClassVar[tuple[str, ...]]                 # its roles, in order
    prompt_sets: ClassVar[Mapping[str, Any]]          # name -> PromptSet (drmas/mas/prompting.py)
    behaviour_labels: ClassVar[Mapping[str, str]]     # episode stat -> table label
    percent_stats: ClassVar[Collection[str]]          # stats shown as percentages
    options_class: ClassVar[type[MasOptions]]         # what `mas_options:` may set
    options: MasOptions

    def run(self, problems: list[dict], act: Act) -> list[Episode]:
        """One episode per problem; every agent's calls batched across episodes (`call`)."""
        ...
