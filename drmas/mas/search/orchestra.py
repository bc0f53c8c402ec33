"""The search MAS (ARCHITECTURE.md, "Search MAS"): a Verifier routes each turn to a
Searcher or an Answerer, with the paper's control flow.

A turn is one environment step. On every turn but the last, the Verifier reads the question
and the history and says `<verify>yes</verify>` (the Answerer answers) or
`<verify>no</verify>` (the Searcher writes a query; the top-k documents join the history).
The options (`SearchOptions`, the benchmark file's `mas_options:`) are `max_turns`, `topk`
and `last_turn`, how the last turn goes:
- `verify` (upstream's current search orchestra): the Verifier routes it too; "yes" goes to
  the Answerer, "no" to nobody (no Searcher on the last turn: its query could never be
  read), so the episode ends without an answer;
- `answer` (upstream's earlier orchestra): no Verifier call, the Answerer answers.
Only a tagged `<answer>` ends an episode: an Answerer output without one is a lost turn
(recorded in the history) and the next turn starts over with the Verifier. An episode still
without an answer after `max_turns` turns scores 0 (`info["forced_zero"]`).

A Searcher output without a `<search>` tag searches nothing; the history records the lost
turn, so the next turn sees it (rather than a silent skip, which would hide the failure).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from drmas.config.schema import opt
from drmas.errors import DrmasError
from drmas.mas.base import Act, Action, Episode, MasOptions, call
from drmas.mas.parsing import tag_only
from drmas.mas.prompting import pick
from drmas.mas.search import stats
from drmas.mas.search.answerer import Answerer
from drmas.mas.search.history import SearchEpisode, record_lost_answer, record_search
from drmas.mas.search.prompts import PROMPT_SETS
from drmas.mas.search.searcher import Searcher
from drmas.mas.search.verifier import Verifier
from drmas.registry import MAS

#: How the last turn goes (`SearchOptions.last_turn`; see the module docstring).
LAST_TURN = ("answer", "verify")


@dataclass(frozen=True)
class SearchOptions(MasOptions):
    """The search MAS's options (`mas_options:` of benchmarks/search.yaml; a profile may
    override them under `mas_options.search`)."""

    max_turns: int = opt(4, "at most this many turns (each: the Verifier, then the Searcher or the Answerer)", minimum=1)
    topk: int = opt(3, "documents returned per search inside <information>...</information>", minimum=1)
    last_turn: Literal[LAST_TURN] = opt("verify", "the last turn: verify (the Verifier routes it, as upstream) or answer (always answers)")

    def key(self) -> dict:
        """As `MasOptions.key`, with `last_turn` under the name it has always had in the
        stage keys (`search_last_turn`), so that existing runs keep their identity."""
        key = super().key()
        key["search_last_turn"] = key.pop("last_turn")
        return key


@MAS.register("search")
class SearchOrchestra:
    """Runs a batch of search episodes. Per turn: one Verifier call for all active episodes
    (none on the last turn under `last_turn="answer"`), one Answerer call for those routed to
    it, one Searcher call for the others (none on the last turn), and one
    `retriever.batch_search` for all their queries."""

    agents = ("verifier", "searcher", "answerer")
    prompt_sets = PROMPT_SETS
    behaviour_labels, percent_stats = stats.LABELS, stats.PERCENT
    options_class = SearchOptions

    def __init__(self, options: SearchOptions = SearchOptions(), *, prompt_set: str = "compact",
                 retriever=None):
        if retriever is None:
            raise DrmasError("the search MAS needs a retriever (an index or a retrieval service)")
        self.options, self.retriever = options, retriever
        self.max_turns, self.topk, self.last_turn = options.max_turns, options.topk, options.last_turn
        prompts = pick(PROMPT_SETS, prompt_set, "search")
        self.verifier, self.searcher, self.answerer = (Verifier(prompts), Searcher(prompts),
                                                       Answerer(prompts))

    def run(self, problems: list[dict], act: Act) -> list[Episode]:
        episodes = [SearchEpisode(problem=p) for p in problems]
        active: list[SearchEpisode] = episodes
        for turn in range(self.max_turns):
            if not active:
                break
            last = turn == self.max_turns - 1
            if last and self.last_turn == "answer":
                answering, searching = active, []
            else:
                verdicts = call(act, self.verifier, active, turn)
                answering = [ep for ep, v in zip(active, verdicts) if v.value == "yes"]
                searching = [] if last else [ep for ep, v in zip(active, verdicts)
                                             if v.value == "no"]
            for ep, answer in zip(answering, call(act, self.answerer, answering, turn)):
                if answer.value is None:
                    record_lost_answer(ep)
                else:
                    ep.done = True
                    ep.answer = tag_only(ep.turns[-1].gen.text, "answer")
            self._search(searching, call(act, self.searcher, searching, turn))
            active = [ep for ep in active if not ep.done]
        for ep in episodes:
            stats.finish(ep)
        return episodes

    def _search(self, episodes: list[SearchEpisode], actions: list[Action]) -> None:
        """One batched retrieval for every non-empty query of this turn; record all steps."""
        queries = [a.value for a in actions if a.value]
        results = iter(self.retriever.batch_search(queries, k=self.topk) if queries else [])
        for ep, action in zip(episodes, actions):
            record_search(ep, action.value, next(results) if action.value else [])
