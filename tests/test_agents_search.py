"""Search MAS: tag parsing, validity, and orchestra routing with scripted agents.

The retriever here is an in-memory test double (a title lookup) that records its calls: it
checks routing and batching only; real BM25 search is tested in test_knowledge.py.
"""

from types import SimpleNamespace

import pytest

from drmas.agents.registry import get_agent, get_orchestra
from drmas.agents.search import (NO_HITS, NO_QUERY, Answerer, Searcher, SearchEpisode,
                                 SearchOrchestra, Verifier, record_search, render_history)
from drmas.errors import DrmasError
from drmas.retrieval.searcher import Hit


@pytest.mark.parametrize("text,value,valid", [
    ("<verify>yes</verify>", "yes", True),
    ("hmm <verify> NO </verify>", "no", True),
    ("no tag at all", "yes", False),             # missing verdict = yes, invalid format
    ("<verify>maybe</verify>", "yes", False),
])
def test_verifier_parse(text, value, valid):
    action = Verifier().parse(text)
    assert (action.value, action.valid) == (value, valid)


def test_searcher_and_answerer_parse():
    assert Searcher().parse("<search> Varo   Telmin </search>").value == "Varo Telmin"
    assert Searcher().parse("<search>  </search>").valid is False
    assert Searcher().parse("Varo Telmin").valid is False
    assert (Answerer().parse("<answer>Korvath</answer>").value, Answerer().parse("x").valid) == ("Korvath", False)
    assert Answerer().parse("<answer></answer>").valid is True    # a tag, even empty, is the format


def test_prompts_carry_question_and_history():
    ep = SearchEpisode(problem={"question": "Where was Varo born?"})
    assert "No searches yet." in Verifier().prompt(ep)[-1]["content"]
    record_search(ep, "Varo", [Hit("1", "Varo", "Varo was born in Korvath.", 1.0)])
    record_search(ep, None, [])
    record_search(ep, "zzz", [])
    history = render_history(ep)
    assert history == ("<search> Varo </search>\n<information>Doc 1(Title: Varo) Varo was born in "
                       f"Korvath.</information>\n<search>  </search>\n<information>{NO_QUERY}"
                       f"</information>\n<search> zzz </search>\n<information>{NO_HITS}</information>")
    for agent, tag in ((Verifier(), "<verify>"), (Searcher(), "<search>"), (Answerer(), "<answer>")):
        text = agent.prompt(ep)[-1]["content"]
        assert text.startswith(history + "\nQuestion: Where was Varo born?\n") and tag in text


class FakeRetriever:
    """Title lookup over a dict; records every batch_search call."""

    def __init__(self, docs):
        self.docs, self.calls = docs, []

    def batch_search(self, queries, k=3):
        self.calls.append(list(queries))
        return [[Hit(q, q, self.docs[q], 1.0)] if q in self.docs else [] for q in queries]


def scripted(script):
    """An act() answering each agent from per-episode scripts keyed by the question text."""
    log = []

    def act(agent, prompts):
        log.append((agent, len(prompts)))
        out = []
        for p in prompts:
            question = next(line for line in p[-1]["content"].split("\n")
                            if line.startswith("Question: ")).removeprefix("Question: ")
            out.append(SimpleNamespace(text=script[question][agent].pop(0)))
        return out
    return act, log


def problems(*names):
    return [{"question": n, "answers": ["x"]} for n in names]


def test_routing_batching_and_history():
    script = {
        "a": {"verifier": ["<verify>no</verify>", "<verify>yes</verify>"],
              "searcher": ["<search>Alpha</search>"], "answerer": ["<answer>x</answer>"]},
        "b": {"verifier": ["<verify>yes</verify>"], "answerer": ["<answer>y</answer>"]},
        "c": {"verifier": ["<verify>no</verify>", "<verify>no</verify>", "<verify>yes</verify>"],
              "searcher": ["<search>Beta</search>", "no tag"], "answerer": ["<answer>z</answer>"]},
    }
    act, log = scripted(script)
    retriever = FakeRetriever({"Alpha": "Alpha text.", "Beta": "Beta text."})
    a, b, c = SearchOrchestra(max_turns=4, topk=2, retriever=retriever).run(problems("a", "b", "c"), act)
    # per turn: one verifier call for all active, one answerer call, one searcher call
    assert log == [("verifier", 3), ("answerer", 1), ("searcher", 2),
                   ("verifier", 2), ("answerer", 1), ("searcher", 1),
                   ("verifier", 1), ("answerer", 1)]
    # one retrieval per turn with a valid query; the tagless query searched nothing
    assert retriever.calls == [["Alpha", "Beta"]]
    assert a.history == [("Alpha", "Doc 1(Title: Alpha) Alpha text.")]
    assert c.history[1] == ("", NO_QUERY)
    assert "Doc 1(Title: Alpha) Alpha text." in a.turns[-1].prompt[-1]["content"]  # answerer saw it
    assert [ep.answer for ep in (a, b, c)] == ["<answer>x</answer>", "<answer>y</answer>", "<answer>z</answer>"]
    assert [t.agent for t in c.turns] == ["verifier", "searcher", "verifier", "searcher",
                                          "verifier", "answerer"]
    assert c.turns[3].action.valid is False
    assert (a.info, b.info["searched_before_answer"], c.info["searches"]) == (
        {"num_turns": 2, "searches": 1, "searched_before_answer": 1, "forced_zero": False}, 0, 2)


def test_evidence_stats_for_rows_that_name_their_passages():
    script = {
        "early": {"verifier": ["<verify>no</verify>", "<verify>yes</verify>"],
                  "searcher": ["<search>Alpha</search>"], "answerer": ["<answer>x</answer>"]},
        "full": {"verifier": ["<verify>no</verify>"] * 2 + ["<verify>yes</verify>"],
                 "searcher": ["<search>Alpha</search>", "<search>Beta</search>"],
                 "answerer": ["<answer>x</answer>"]},
        "stuck": {"verifier": ["<verify>no</verify>"] * 4,
                  "searcher": ["<search>Alpha</search>", "<search>Beta</search>", "<search>Q</search>"]},
    }
    act, _ = scripted(script)
    rows = [{**p, "hops": ["Alpha", "Beta"]} for p in problems("early", "full", "stuck")]
    retriever = FakeRetriever({"Alpha": "Alpha text.", "Beta": "Beta text."})
    early, full, stuck = SearchOrchestra(max_turns=4, retriever=retriever).run(rows, act)
    assert (early.info["evidence_found"], early.info["answered_early"]) == (0, 1)
    assert (full.info["evidence_found"], full.info["answered_early"]) == (1, 0)
    assert (stuck.info["evidence_found"], stuck.info["answered_early"]) == (1, 0)   # no answer
    assert full.titles == {"Alpha", "Beta"}


def test_final_no_forces_zero_and_missing_verdict_answers():
    script = {
        "stuck": {"verifier": ["<verify>no</verify>"] * 3 + ["<verify>no</verify>"],
                  "searcher": ["<search>Q</search>"] * 3},
        "tagless": {"verifier": ["I think so"], "answerer": ["<answer>x</answer>"]},
    }
    act, log = scripted(script)
    retriever = FakeRetriever({})
    stuck, tagless = SearchOrchestra(max_turns=4, retriever=retriever).run(problems("stuck", "tagless"), act)
    assert stuck.info == {"num_turns": 4, "searches": 3, "searched_before_answer": 0, "forced_zero": True}
    assert stuck.answer == "" and len(retriever.calls) == 3      # no search on the last turn
    assert log[-1] == ("verifier", 1)                             # the final "no" ends it
    assert tagless.turns[0].action.valid is False and tagless.answer == "<answer>x</answer>"
    assert tagless.info["forced_zero"] is False


def test_max_turns_one_and_score_semantics():
    from drmas.rewards import get_reward
    from drmas.rollout.mas import score_episodes

    act, log = scripted({"q": {"verifier": ["<verify>no</verify>"]},
                         "r": {"verifier": ["<verify>yes</verify>"], "answerer": ["<answer>The X</answer>"]}})
    eps = SearchOrchestra(max_turns=1, retriever=FakeRetriever({})).run(problems("q", "r"), act)
    assert log == [("verifier", 2), ("answerer", 1)]
    assert score_episodes(eps, get_reward("qa")) == [0.0, 1.0]


def test_registry_and_retriever_required():
    assert get_orchestra("search") is SearchOrchestra
    assert (get_agent("search.verifier"), get_agent("searcher"), get_agent("answerer")) == (
        Verifier, Searcher, Answerer)
    assert Verifier.name == "verifier" and SearchOrchestra.agents == ("verifier", "searcher", "answerer")
    with pytest.raises(DrmasError, match="retriever"):
        SearchOrchestra()


def test_build_orchestra_from_the_suite_file():
    from repo import REPO as ROOT
    from drmas.config import load_suite
    from drmas.rollout.mas import build_orchestra

    orchestra = build_orchestra(load_suite(ROOT / "benchmarks" / "search.yaml"), retriever=FakeRetriever({}))
    assert (orchestra.max_turns, orchestra.topk) == (4, 3)
