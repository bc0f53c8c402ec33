"""What every agent and orchestra shares: chat prompts in, parsed actions out.

An agent never calls a model itself. The orchestra asks an `act` callable for a batch of
completions (`act(agent_name, list_of_chat_prompts) -> list_of_generations`), which lets the
trainer route each agent to its worker group, batch all episodes' calls to one agent into one
generate call, and lets tests drive an orchestra with scripted agents.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from drmas.tags import last_tag  # noqa: F401  (agents import it from here)

Messages = list[dict[str, str]]


class Generation(Protocol):
    """Anything with the generated text; engines add token ids and logprobs."""

    text: str


Act = Callable[[str, Sequence[Messages]], Sequence[Any]]


@dataclass
class Action:
    """A parsed agent output. `valid` is False when the output breaks the agent's format."""

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


def parse_verdict(text: str, verdicts: tuple[str, ...], default: str) -> Action:
    """The last `<verify>…</verify>` if it is one of `verdicts` (any case); otherwise
    `default`, marked invalid: both MAS treat a missing verdict as a fixed choice."""
    verdict = last_tag(text, "verify")
    verdict = verdict.lower() if verdict else None
    if verdict in verdicts:
        return Action(verdict, True)
    return Action(default, False)


class Agent:
    """A role: builds its chat prompt from the episode and parses its own output."""

    name: str = ""
    system: str = ""

    def prompt(self, episode: Episode) -> Messages:
        messages = [{"role": "system", "content": self.system}] if self.system else []
        return messages + [{"role": "user", "content": self.user_text(episode)}]

    def user_text(self, episode: Episode) -> str:
        raise NotImplementedError

    def parse(self, text: str) -> Action:
        raise NotImplementedError


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
