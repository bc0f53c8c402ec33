"""The search MAS (DESIGN, "Search MAS"): a Verifier routes each turn to a Searcher or an Answerer.

Each turn the Verifier reads the question and the shared history (every query so far and the
documents it returned) and says `<verify>yes</verify>` (enough information: the Answerer
answers, which ends the episode) or `<verify>no</verify>` (the Searcher writes
`<search> query </search>`; the top-k documents are appended to the history inside
`<information>…</information>`, in Search-R1's `Doc i(Title: …) …` format). A missing or
unknown verdict counts as "yes" and as invalid format.

At most `max_turns` turns. A "no" on the last turn ends the episode with reward 0
(`info["forced_zero"]`); the Searcher is not called then, since nobody would read its results.

A Searcher output without a non-empty `<search>` tag searches nothing: the history records an
empty query and a note in the information block, so the next turn sees that the turn was lost
(rather than silently skipping it, which would hide the failure from the other agents).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from drmas.agents.base import Act, Action, Agent, Episode, call, last_tag, parse_verdict
from drmas.agents.registry import register, register_orchestra
from drmas.errors import DrmasError
from drmas.retrieval.searcher import Hit, format_docs

VERDICTS = ("yes", "no")
NO_QUERY = "No search: the query was missing."
NO_HITS = "No documents found."


@dataclass
class SearchEpisode(Episode):
    """An Episode plus the history all three agents read: (query, information) per search."""

    history: list[tuple[str, str]] = field(default_factory=list)
    titles: set[str] = field(default_factory=set)      # titles of every document retrieved


def record_search(episode: SearchEpisode, query: str | None, hits: list[Hit]) -> None:
    """Append one search (its query and the documents it found) to the shared history."""
    if not query:
        episode.history.append(("", NO_QUERY))
    else:
        episode.history.append((query, format_docs(hits).strip() or NO_HITS))
        episode.titles.update(h.title for h in hits)


def render_history(episode: Episode) -> str:
    """The history as the agents see it: `<search> q </search>` and `<information>…</information>`.

    Queries and answers are written with a space inside their tags (as in Search-R1's
    prompts): a name then tokenizes the same as in the question and the documents, which
    makes copying it much easier for a small BPE model.
    """
    history = getattr(episode, "history", [])
    if not history:
        return "No searches yet."
    return "\n".join(f"<search> {q} </search>\n<information>{info}</information>" for q, info in history)


class _SearchAgent(Agent):
    """Prompt = the shared history, then the question, then this role's instruction.

    The question comes after the history (Search-R1 puts it first) so that it sits next to
    the instruction and the reply: the searcher copies its words, and a tiny model's
    attention reaches a near span far more easily than one a few hundred tokens back (the
    first query was right in 43% of episodes with the question first and 94% after).
    """

    instruction = ""

    def user_text(self, episode: Episode) -> str:
        return f"{render_history(episode)}\nQuestion: {episode.problem['question']}\n{self.instruction}"


@register("search.verifier")
class Verifier(_SearchAgent):
    """The router: is the information gathered so far enough to answer?"""

    name = "verifier"
    instruction = ("Is the information above enough to answer the question? "
                   "Reply <verify>yes</verify> or <verify>no</verify>.")

    def parse(self, text: str) -> Action:
        return parse_verdict(text, VERDICTS, default="yes")


@register("searcher")
class Searcher(_SearchAgent):
    name = "searcher"
    instruction = "Search for the missing information: state what you know, then <search> query </search>."

    def parse(self, text: str) -> Action:
        query = " ".join((last_tag(text, "search") or "").split())
        return Action(query, True) if query else Action(None, False)


@register("answerer")
class Answerer(_SearchAgent):
    name = "answerer"
    instruction = "Answer the question: state the fact, then <answer> answer </answer>."

    def parse(self, text: str) -> Action:
        answer = last_tag(text, "answer")
        return Action(answer, answer is not None)


@register_orchestra("search")
class SearchOrchestra:
    """Runs a batch of search episodes. Per turn: one Verifier call for all active episodes,
    one Searcher call for those that said no, one `retriever.batch_search` for all their
    queries, one Answerer call for those that said yes."""

    agents = ("verifier", "searcher", "answerer")

    def __init__(self, max_turns: int = 4, topk: int = 3, retriever=None, **_):
        if max_turns < 1 or topk < 1:
            raise ValueError("max_turns and topk must be >= 1")
        if retriever is None:
            raise DrmasError("the search MAS needs a retriever (an index or a retrieval service)")
        self.max_turns, self.topk, self.retriever = max_turns, topk, retriever
        self.verifier, self.searcher, self.answerer = Verifier(), Searcher(), Answerer()

    def run(self, problems: list[dict], act: Act) -> list[Episode]:
        episodes = [SearchEpisode(problem=p) for p in problems]
        active: list[SearchEpisode] = episodes
        for turn in range(self.max_turns):
            if not active:
                break
            verdicts = call(act, self.verifier, active, turn)
            answering = [ep for ep, v in zip(active, verdicts) if v.value == "yes"]
            active = [ep for ep, v in zip(active, verdicts) if v.value == "no"]
            call(act, self.answerer, answering, turn)
            for ep in answering:
                ep.done = True
            if turn < self.max_turns - 1:
                self._search(active, call(act, self.searcher, active, turn))
        for ep in episodes:
            self._finish(ep)
        return episodes

    def _search(self, episodes: list[SearchEpisode], actions: list[Action]) -> None:
        """One batched retrieval for every valid query of this turn; record all searches."""
        queries = [a.value for a in actions if a.valid]
        results = iter(self.retriever.batch_search(queries, k=self.topk) if queries else [])
        for ep, action in zip(episodes, actions):
            record_search(ep, action.value, next(results) if action.valid else [])

    @staticmethod
    def _finish(ep: SearchEpisode) -> None:
        """Final answer and routing stats (numbers only: the trainer averages them)."""
        agents = [t.agent for t in ep.turns]
        answers = [t.gen.text for t in ep.turns if t.agent == "answerer"]
        ep.answer = answers[-1] if answers else ""
        ep.info.update(
            num_turns=agents.count("verifier"),  # not "turns": eval samples list the turns
            searches=agents.count("searcher"),
            searched_before_answer=int(bool(answers) and "searcher" in agents),
            forced_zero=not ep.done,
        )
        hops = ep.problem.get("hops")
        if hops:   # rows that name their evidence passages (the generated knowledge base)
            found = all(h in ep.titles for h in hops)
            ep.info.update(evidence_found=int(found), answered_early=int(bool(answers) and not found))
        ep.done = True
