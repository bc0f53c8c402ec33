"""Prompt sets: the words a MAS's agents are prompted with, chosen per profile.

Every MAS folder defines its prompt sets in `prompts.py`, each a `PromptSet` with one method
per agent (episode -> the user message) and, optionally, a system message. Two sets ship:

- `upstream`: the paper's prompts exactly (its system prompt, its environment prompt, the
  team context, each agent's role prompt), for pretrained models;
- `compact`: short prompts that tiny models trained from scratch can follow (the default).

Both go through the same orchestra, so control flow and extraction rules
(`drmas/mas/parsing.py`) do not depend on the set. What does depend on it is the output
format an agent is *asked* for, and so what counts as a valid output: the paper asks its
Searcher and Answerer for one `<think>…</think>` pair, and its projection marks outputs with
CJK characters invalid; the compact prompts ask for neither.
"""

from __future__ import annotations

from dataclasses import dataclass

from drmas.errors import ConfigError
from drmas.mas.parsing import has_cjk, one_think_pair


@dataclass(frozen=True)
class OutputFormat:
    """What an agent's output must look like, beyond the tag its action is read from."""

    think: bool = False            # exactly one <think>...</think> pair
    no_cjk: bool = False           # no CJK characters

    def ok(self, text: str) -> bool:
        if self.no_cjk and has_cjk(text):
            return False
        return not self.think or one_think_pair(text)


class PromptSet:
    """One MAS's prompts: `system` (None: no system message), one method per agent named
    after it (episode -> user text) and `formats` (agent -> OutputFormat)."""

    name: str = ""
    system: str | None = None
    formats: dict[str, OutputFormat] = {}

    def messages(self, agent: str, episode) -> list[dict[str, str]]:
        user = getattr(self, agent)(episode)
        head = [{"role": "system", "content": self.system}] if self.system is not None else []
        return head + [{"role": "user", "content": user}]

    def format_ok(self, agent: str, text: str) -> bool:
        return self.formats.get(agent, OutputFormat()).ok(text)


def pick(prompt_sets: dict[str, PromptSet], name: str, mas: str) -> PromptSet:
    """The prompt set `name` of MAS `mas`; a ConfigError naming the known ones otherwise."""
    if name not in prompt_sets:
        raise ConfigError(f"unknown prompt set {name!r} for MAS {mas!r}; "
                          f"known: {', '.join(sorted(prompt_sets))}")
    return prompt_sets[name]
