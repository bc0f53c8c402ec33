"""What every agent and orchestra shares: chat prompts in, parsed actions out.

An agent never calls a model itself. The orchestra asks an `act` callable for a batch of
completions (`act(agent_name, list_of_chat_prompts) -> list_of_generations`), which lets the
trainer route each agent to its worker group, batch all episodes' calls to one agent into one
generate call, and lets tests drive an orchestra with scripted agents.

An agent owns its extraction rule (which tag it acts on, how it is read: the same under every
prompt set, as in the paper's code); its prompt text and the output format it is asked for
come from the MAS's prompt set (`drmas/mas/prompting.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

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
