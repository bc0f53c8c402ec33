"""The search MAS's shared state: one step per turn that did not end the episode.

As in the paper's environment, every turn is an environment step: a search (its query and
the documents it found), a Searcher output without a `<search>` tag (nothing searched), or
an Answerer output without an `<answer>` tag (no answer: the episode goes on). Prompt sets
render these steps (drmas/mas/search/prompts.py); the orchestra and the warm-start
demonstrations only record them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from drmas.mas.base import Episode
from drmas.retrieval.searcher import Hit


@dataclass
class SearchStep:
    """One turn's step. `agent` is "searcher" or "answerer" (an untagged answer); `query` is
    the first `<search>` tag's stripped content (None: no tag, nothing searched)."""

    agent: str
    query: str | None = None
    hits: list[Hit] = field(default_factory=list)

    @property
    def searched(self) -> bool:
        return self.agent == "searcher" and self.query is not None


@dataclass
class SearchEpisode(Episode):
    """An Episode plus the steps all three agents read and the titles retrieved so far."""

    history: list[SearchStep] = field(default_factory=list)
    titles: set[str] = field(default_factory=set)      # titles of every document retrieved


def record_search(episode: SearchEpisode, query: str | None, hits: list[Hit]) -> None:
    """Append a Searcher's step: its query (None: no tag) and the documents it found."""
    episode.history.append(SearchStep("searcher", query, list(hits)))
    episode.titles.update(h.title for h in hits)


def record_lost_answer(episode: SearchEpisode) -> None:
    """Append the step of an Answerer output without an `<answer>` tag."""
    episode.history.append(SearchStep("answerer"))
