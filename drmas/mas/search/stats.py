"""Episode stats of the search MAS (averaged into the behaviour table) and their labels."""

from __future__ import annotations

from drmas.mas.search.history import SearchEpisode

LABELS = {"searched_before_answer": "searched before answering (%)",
          "searches": "searches / episode", "num_turns": "turns / episode",
          "forced_zero": "no answer by the last turn (%)",
          "evidence_found": "every evidence passage retrieved (%)",
          "answered_early": "answered before the evidence was in (%)"}
PERCENT = {"searched_before_answer", "forced_zero", "evidence_found", "answered_early"}


def finish(ep: SearchEpisode) -> None:
    """Routing stats (numbers only: the trainer averages them). `ep.done` says whether a
    tagged answer ended the episode; without one it scores 0 (`forced_zero`)."""
    agents = [t.agent for t in ep.turns]
    ep.info.update(
        # not "turns": eval samples list the turns. Each turn with a call: a last turn whose
        # Verifier says "no" (last_turn: verify) adds no history step, yet was a turn
        num_turns=len({t.turn for t in ep.turns}),
        searches=agents.count("searcher"),
        searched_before_answer=int(ep.done and "searcher" in agents),
        forced_zero=not ep.done,
    )
    hops = ep.problem.get("hops")
    if hops:   # rows that name their evidence passages (the generated knowledge base)
        found = all(h in ep.titles for h in hops)
        ep.info.update(evidence_found=int(found), answered_early=int(ep.done and not found))
    ep.done = True
