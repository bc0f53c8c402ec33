"""The paper's extraction rules (drmas/mas/parsing.py) and the output formats of the prompt
sets, rule by rule, on hand-made outputs."""

import pytest

from drmas.mas.base import Action
from drmas.mas.parsing import first_tag, has_cjk, one_think_pair, tag_only, tag_tidied, verdict
from drmas.mas.prompting import OutputFormat
from drmas.mas.search.answerer import Answerer
from drmas.mas.search.prompts import PROMPT_SETS
from drmas.mas.search.searcher import Searcher
from drmas.mas.search.verifier import Verifier

COMPACT, UPSTREAM = PROMPT_SETS["compact"], PROMPT_SETS["upstream"]


def test_first_opening_and_first_closing_tag():
    text = "a <search> one </search> b <search>two</search>"
    span = first_tag(text, "search")
    assert (span.content, span.start, span.end) == ("one", 2, 15)
    assert first_tag("<search>open only", "search") is None
    assert first_tag("close only</search>", "search") is None
    assert first_tag("</search>x<search>", "search").content == ""     # upstream's slicing


def test_tag_only_and_tag_tidied():
    assert tag_only("think <answer>  Paris </answer> more <answer>Rome</answer>", "answer") == "<answer>Paris</answer>"
    assert tag_only("Paris", "answer") == ""
    assert tag_tidied("why <verify> Yes </verify> and <verify> no </verify>", "verify") == (
        "why <verify>Yes</verify> and <verify> no </verify>")       # only the first is tidied
    assert tag_tidied("no verdict", "verify") == "no verdict"


@pytest.mark.parametrize("text,lowercase,expected", [
    ("<verify>no</verify> then <verify>yes</verify>", True, "yes"),    # priority, not position
    ("<verify>yes</verify> then <verify>no</verify>", True, "yes"),
    ("<verify> NO </verify>", True, "no"),                              # tidied, lower-cased
    ("<verify>NO</verify>", False, "yes"),                              # case-sensitive: default
    ("<verify>perhaps</verify>", True, "yes"),                          # unknown: default
    ("nothing", True, "yes"),
    ("<verify>  no</verify> and <verify> no </verify>", True, "no"),
])
def test_verdict_by_priority(text, lowercase, expected):
    assert verdict(text, "verify", ("yes", "no"), lowercase) == expected


def test_think_pair_and_cjk():
    assert one_think_pair("<think>a</think> b")
    assert not one_think_pair("no think")
    assert not one_think_pair("<think>a</think><think>b</think>")
    assert not one_think_pair("</think> a <think>")
    assert not one_think_pair("<think>a")
    assert has_cjk("答案 is x") and not has_cjk("naïve café ü") and not has_cjk("カタカナ")
    assert OutputFormat().ok("anything 答案")
    assert not OutputFormat(think=True, no_cjk=True).ok("<think>好</think>")


@pytest.mark.parametrize("agent,text,upstream,compact", [
    # the Searcher: one think pair and no CJK under upstream; a tag alone under compact
    (Searcher, "<think>x</think><search>q</search>", Action("q", True), Action("q", True)),
    (Searcher, "<search>q</search>", Action("q", False), Action("q", True)),
    (Searcher, "<think>x</think><think>y</think><search>q</search>", Action("q", False), Action("q", True)),
    (Searcher, "<think>查</think><search>q</search>", Action("q", False), Action("q", True)),
    (Searcher, "<think>x</think> q", Action(None, False), Action(None, False)),
    # the Answerer: the same format rules
    (Answerer, "<think>x</think><answer> A </answer>", Action("A", True), Action("A", True)),
    (Answerer, "<answer>A</answer>", Action("A", False), Action("A", True)),
    (Answerer, "<think>x</think>A", Action(None, False), Action(None, False)),
    # the Verifier: no think pair asked; CJK still invalid under upstream
    (Verifier, "<verify>no</verify>", Action("no", True), Action("no", True)),
    (Verifier, "不 <verify>no</verify>", Action("no", False), Action("no", True)),
])
def test_validity_follows_the_prompt_set(agent, text, upstream, compact):
    assert agent(UPSTREAM).parse(text) == upstream
    assert agent(COMPACT).parse(text) == compact


def test_an_invalid_but_tagged_output_still_acts():
    """Upstream searches with, and ends on, tagged outputs whatever their format validity."""
    from drmas.mas.search.orchestra import SearchOptions, SearchOrchestra
    from retrievers import FakeRetriever
    from scripted import recording

    replies = {"verifier": ["<verify>no</verify>", "<verify>yes</verify>"],
               "searcher": ["<search>q</search>"],                # no think pair: invalid
               "answerer": ["<answer>a</answer>"]}                # no think pair: invalid
    act, _ = recording(replies)
    shelf = FakeRetriever({})                                     # finds nothing
    (ep,) = SearchOrchestra(SearchOptions(max_turns=4, last_turn="answer"), retriever=shelf, prompt_set="upstream").run(
        [{"question": "q?", "answers": ["a"]}], act)
    assert shelf.calls == [["q"]] and ep.answer == "<answer>a</answer>"
    assert [t.action.valid for t in ep.turns] == [True, False, True, False]
