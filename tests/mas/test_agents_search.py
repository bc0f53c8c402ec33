"""Search MAS: tag parsing, validity, and orchestra routing with scripted agents.

The retriever here is an in-memory test double (a title lookup) that records its calls: it
checks routing and batching only; real BM25 search is tested in test_knowledge.py.
"""

from types import SimpleNamespace

import pytest

from drmas.errors import ConfigError, DrmasError
from drmas.mas.base import Action
from drmas.mas.search.answerer import Answerer
from drmas.mas.search.history import SearchEpisode, SearchStep, record_lost_answer, record_search
from drmas.mas.search.orchestra import SearchOptions, SearchOrchestra
from drmas.mas.search.prompts import NO_ANSWER, NO_HITS, NO_QUERY, PROMPT_SETS
from drmas.mas.search.searcher import Searcher
from drmas.mas.search.verifier import Verifier
from drmas.registry import MAS
from drmas.retrieval.searcher import Hit
from retrievers import FakeRetriever

COMPACT = PROMPT_SETS["compact"]


@pytest.mark.parametrize("text,value,valid", [
    ("<verify>yes</verify>", "yes", True),
    ("hmm <verify> NO </verify>", "no", True),     # tidied, then lower-cased
    ("no tag at all", "yes", False),             # missing verdict = yes, invalid format
    ("<verify>maybe</verify>", "yes", True),     # a tag pair is the format
    ("<verify>no</verify> <verify>yes</verify>", "yes", True),   # yes wins, wherever it is
])
def test_verifier_parse(text, value, valid):
    action = Verifier(COMPACT).parse(text)
    assert (action.value, action.valid) == (value, valid)


def test_searcher_and_answerer_parse():
    searcher, answerer = Searcher(COMPACT), Answerer(COMPACT)
    assert searcher.parse("<search> Varo   Telmin </search>") == Action("Varo   Telmin", True)
    assert searcher.parse("<search>first</search> <search>second</search>").value == "first"
    assert searcher.parse("<search>  </search>") == Action("", True)     # tags: the format
    assert searcher.parse("Varo Telmin") == Action(None, False)
    assert answerer.parse("<answer> Korvath </answer>") == Action("Korvath", True)
    assert answerer.parse("x") == Action(None, False)
    assert answerer.parse("<answer></answer>") == Action("", True)


def test_compact_prompts_carry_question_and_history():
    ep = SearchEpisode(problem={"question": "Where was Varo born?"})
    assert "No searches yet." in Verifier(COMPACT).prompt(ep)[-1]["content"]
    record_search(ep, "Varo", [Hit("1", "Varo", "Varo was born in Korvath.", 1.0)])
    record_search(ep, None, [])
    record_search(ep, "zzz", [])
    record_lost_answer(ep)
    history = COMPACT.history(ep)
    assert history == ("<search> Varo </search>\n<information>Doc 1(Title: Varo) Varo was born in "
                       f"Korvath.</information>\n<search>  </search>\n<information>{NO_QUERY}"
                       f"</information>\n<search> zzz </search>\n<information>{NO_HITS}</information>"
                       f"\n<answer>  </answer>\n<information>{NO_ANSWER}</information>")
    for agent, tag in ((Verifier, "<verify>"), (Searcher, "<search>"), (Answerer, "<answer>")):
        messages = agent(COMPACT).prompt(ep)
        assert len(messages) == 1 and messages[0]["role"] == "user"      # no system prompt
        text = messages[0]["content"]
        assert text.startswith(history + "\nQuestion: Where was Varo born?\n") and tag in text


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
              "searcher": ["<search>Beta</search> <search>Gamma</search>", "no tag"],
              "answerer": ["sure: <answer> z </answer> <answer>w</answer>"]},
    }
    act, log = scripted(script)
    retriever = FakeRetriever({"Alpha": "Alpha text.", "Beta": "Beta text."})
    a, b, c = SearchOrchestra(SearchOptions(max_turns=4, topk=2, last_turn="answer"),
                              retriever=retriever).run(problems("a", "b", "c"), act)
    # per turn: one verifier call for all active, one answerer call, one searcher call
    assert log == [("verifier", 3), ("answerer", 1), ("searcher", 2),
                   ("verifier", 2), ("answerer", 1), ("searcher", 1),
                   ("verifier", 1), ("answerer", 1)]
    # one retrieval per turn with a query; the first <search> tag counts; no tag, no search
    assert retriever.calls == [["Alpha", "Beta"]]
    assert a.history == [SearchStep("searcher", "Alpha", [Hit("Alpha", "Alpha", "Alpha text.", 1.0)])]
    assert c.history[1] == SearchStep("searcher", None, [])
    assert "Doc 1(Title: Alpha) Alpha text." in a.turns[-1].prompt[-1]["content"]  # answerer saw it
    # the answer the reward reads is the first <answer> tag, as upstream hands it on
    assert [ep.answer for ep in (a, b, c)] == ["<answer>x</answer>", "<answer>y</answer>", "<answer>z</answer>"]
    assert [t.agent for t in c.turns] == ["verifier", "searcher", "verifier", "searcher",
                                          "verifier", "answerer"]
    assert c.turns[3].action.valid is False
    assert (a.info, b.info["searched_before_answer"], c.info["searches"]) == (
        {"num_turns": 2, "searches": 1, "searched_before_answer": 1, "forced_zero": False}, 0, 2)


def test_only_a_tagged_answer_ends_an_episode():
    script = {"q": {"verifier": ["<verify>yes</verify>", "<verify>yes</verify>"],
                    "answerer": ["It is x.", "<answer>x</answer>"]}}
    act, log = scripted(script)
    (ep,) = SearchOrchestra(SearchOptions(max_turns=4, last_turn="answer"),
                            retriever=FakeRetriever({})).run(problems("q"), act)
    assert log == [("verifier", 1), ("answerer", 1), ("verifier", 1), ("answerer", 1)]
    assert ep.history == [SearchStep("answerer")]          # the lost turn is in the history
    assert f"<information>{NO_ANSWER}</information>" in ep.turns[2].prompt[-1]["content"]
    assert [t.action.valid for t in ep.turns] == [True, False, True, True]
    assert ep.info == {"num_turns": 2, "searches": 0, "searched_before_answer": 0, "forced_zero": False}


def test_last_turn_answers_without_the_verifier():
    script = {
        "stuck": {"verifier": ["<verify>no</verify>"] * 3, "searcher": ["<search>Q</search>"] * 3,
                  "answerer": ["<answer>guess</answer>"]},
        "mute": {"verifier": ["<verify>yes</verify>"] * 3, "answerer": ["no tag"] * 4},
        "tagless": {"verifier": ["I think so"], "answerer": ["<answer>x</answer>"]},
    }
    act, log = scripted(script)
    retriever = FakeRetriever({})
    stuck, mute, tagless = SearchOrchestra(SearchOptions(max_turns=4, last_turn="answer"),
                                           retriever=retriever).run(
        problems("stuck", "mute", "tagless"), act)
    assert log[-1] == ("answerer", 2) and ("verifier", 2) not in log[-2:]   # turn 4: no verifier
    assert [t.agent for t in stuck.turns][-2:] == ["searcher", "answerer"]
    assert stuck.info == {"num_turns": 4, "searches": 3, "searched_before_answer": 1, "forced_zero": False}
    assert stuck.answer == "<answer>guess</answer>" and len(retriever.calls) == 3
    assert mute.info == {"num_turns": 4, "searches": 0, "searched_before_answer": 0, "forced_zero": True}
    assert mute.answer == "" and len(mute.history) == 4
    assert tagless.turns[0].action.valid is False and tagless.answer == "<answer>x</answer>"


def test_last_turn_verified_routes_yes_to_the_answerer_and_no_to_nobody():
    """`last_turn="verify"` (upstream's current orchestra): the Verifier is called on every
    turn, the last included; there a "yes" goes to the Answerer, a "no" to nobody (no
    Searcher, no Answerer): no answer, reward 0."""
    from drmas.rewards import get_reward
    from drmas.rollout.mas import score_episodes

    script = {
        "stuck": {"verifier": ["<verify>no</verify>"] * 4, "searcher": ["<search>Q</search>"] * 3,
                  "answerer": []},
        "late": {"verifier": ["<verify>no</verify>"] * 3 + ["<verify>yes</verify>"],
                 "searcher": ["<search>Q</search>"] * 3, "answerer": ["<answer>x</answer>"]},
        "mute": {"verifier": ["<verify>yes</verify>"] * 4, "answerer": ["no tag"] * 4},
        "tagless": {"verifier": ["<verify>no</verify>"] * 3 + ["I think so"],   # missing = yes
                    "searcher": ["no tag"] * 3, "answerer": ["<answer>x</answer>"]},
    }
    act, log = scripted(script)
    retriever = FakeRetriever({})
    orchestra = SearchOrchestra(SearchOptions(max_turns=4, last_turn="verify"), retriever=retriever)
    stuck, late, mute, tagless = orchestra.run(problems("stuck", "late", "mute", "tagless"), act)
    # turn 4: one Verifier call for all four, the Answerer for the three "yes", no Searcher
    assert log[-2:] == [("verifier", 4), ("answerer", 3)]
    assert not any(t.agent == "searcher" and t.turn == 3 for ep in (stuck, late, mute, tagless)
                   for t in ep.turns)
    assert [t.agent for t in stuck.turns][-3:] == ["verifier", "searcher", "verifier"]
    assert "answerer" not in [t.agent for t in stuck.turns] and len(retriever.calls) == 3
    assert stuck.info == {"num_turns": 4, "searches": 3, "searched_before_answer": 0, "forced_zero": True}
    assert stuck.answer == ""
    assert [t.agent for t in late.turns][-2:] == ["verifier", "answerer"] and late.turns[-1].turn == 3
    assert late.info == {"num_turns": 4, "searches": 3, "searched_before_answer": 1, "forced_zero": False}
    assert mute.info["forced_zero"] and len(mute.history) == 4
    assert tagless.turns[-2].action.valid is False and tagless.answer == "<answer>x</answer>"
    rewards = score_episodes([stuck, late, mute, tagless], get_reward("qa"))
    assert rewards == [0.0, 1.0, 0.0, 1.0]


def test_last_turn_flows_agree_before_the_last_turn():
    """The two flows differ on the last turn only: with an answer by turn 3 they are one."""
    def run(last_turn):
        script = {"q": {"verifier": ["<verify>no</verify>", "<verify>yes</verify>"],
                        "searcher": ["<search>Alpha</search>"], "answerer": ["<answer>x</answer>"]}}
        act, log = scripted(script)
        (ep,) = SearchOrchestra(SearchOptions(max_turns=4, last_turn=last_turn),
                                retriever=FakeRetriever({"Alpha": "A."})).run(problems("q"), act)
        return log, [(t.agent, t.turn, t.gen.text) for t in ep.turns], ep.info
    assert run("answer") == run("verify")
    with pytest.raises(ConfigError, match=r"last_turn: 'search' is not one of \['answer', 'verify'\]"):
        SearchOptions(last_turn="search")


def test_max_turns_one_verified():
    act, log = scripted({"q": {"verifier": ["<verify>no</verify>"]},
                         "r": {"verifier": ["<verify>yes</verify>"], "answerer": ["<answer>x</answer>"]}})
    q, r = SearchOrchestra(SearchOptions(max_turns=1, last_turn="verify"), retriever=FakeRetriever({})).run(
        problems("q", "r"), act)
    assert log == [("verifier", 2), ("answerer", 1)]           # the only turn is the last
    assert (q.info["forced_zero"], q.info["num_turns"], r.info["forced_zero"]) == (True, 1, False)


def test_evidence_stats_for_rows_that_name_their_passages():
    script = {
        "early": {"verifier": ["<verify>no</verify>", "<verify>yes</verify>"],
                  "searcher": ["<search>Alpha</search>"], "answerer": ["<answer>x</answer>"]},
        "full": {"verifier": ["<verify>no</verify>"] * 2 + ["<verify>yes</verify>"],
                 "searcher": ["<search>Alpha</search>", "<search>Beta</search>"],
                 "answerer": ["<answer>x</answer>"]},
        "stuck": {"verifier": ["<verify>no</verify>"] * 3,
                  "searcher": ["<search>Alpha</search>", "<search>Beta</search>", "<search>Q</search>"],
                  "answerer": ["no answer"]},
    }
    act, _ = scripted(script)
    rows = [{**p, "hops": ["Alpha", "Beta"]} for p in problems("early", "full", "stuck")]
    retriever = FakeRetriever({"Alpha": "Alpha text.", "Beta": "Beta text."})
    early, full, stuck = SearchOrchestra(SearchOptions(max_turns=4, last_turn="answer"),
                                         retriever=retriever).run(rows, act)
    assert (early.info["evidence_found"], early.info["answered_early"]) == (0, 1)
    assert (full.info["evidence_found"], full.info["answered_early"]) == (1, 0)
    assert (stuck.info["evidence_found"], stuck.info["answered_early"]) == (1, 0)   # no answer
    assert full.titles == {"Alpha", "Beta"}


def test_max_turns_one_and_score_semantics():
    from drmas.rewards import get_reward
    from drmas.rollout.mas import score_episodes

    act, log = scripted({"q": {"answerer": ["no tag"]},
                         "r": {"answerer": ["<answer>The X</answer> or <answer>Y</answer>"]}})
    eps = SearchOrchestra(SearchOptions(max_turns=1, last_turn="answer"),
                          retriever=FakeRetriever({})).run(problems("q", "r"), act)
    assert log == [("answerer", 2)]                # a single turn is the last: no Verifier
    assert score_episodes(eps, get_reward("qa")) == [0.0, 1.0]   # the first answer counts


def test_registry_and_retriever_required():
    assert MAS.get("search") is SearchOrchestra
    assert Verifier.name == "verifier" and SearchOrchestra.agents == ("verifier", "searcher", "answerer")
    with pytest.raises(DrmasError, match="retriever"):
        SearchOrchestra()


def test_build_orchestra_from_the_suite_file():
    from repo import REPO as ROOT
    from drmas.config.suites import load_suite
    from drmas.rollout.mas import build_orchestra

    from drmas.config.profile import workflow_config

    suite = load_suite(ROOT / "benchmarks" / "search.yaml")
    paper = workflow_config([ROOT / "config" / "paper.yaml"], [])      # the upstream prompts
    orchestra = build_orchestra(paper, suite, retriever=FakeRetriever({}))
    assert orchestra.options == SearchOptions(max_turns=4, topk=3, last_turn="verify")
    assert (orchestra.max_turns, orchestra.topk, orchestra.last_turn) == (4, 3, "verify")
    assert orchestra.answerer.prompts is PROMPT_SETS["upstream"]
    answering = workflow_config([ROOT / "config" / "default.yaml"],     # mas_options.search
                                ["mas_options={search: {last_turn: answer}}"])
    answered = build_orchestra(answering, suite, retriever=FakeRetriever({}))
    assert answered.last_turn == "answer" and answered.answerer.prompts is COMPACT
