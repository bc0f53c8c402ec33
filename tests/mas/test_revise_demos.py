"""Warm-start demonstrations of rows the generators mark `"revise": true` (a benchmark entry's
`revise_demos`): the Verifier rejects a wrong draft and the Solver answers again (math), the
Verifier says "no" after a search for a look-alike and the Searcher makes an extra hop
(search). Unmarked rows: tests/data/test_generator_defaults.py (unchanged traces)."""

from drmas.data.generators.arithmetic import generate
from drmas.data.prepare import prepare_corpus, prepare_rows
from drmas.mas.math.demos import math_traces
from drmas.mas.math.solver import Solver
from drmas.mas.math.verifier import Verifier
from drmas.mas.math.prompts import PROMPT_SETS
from drmas.mas.search.demos import key_traces, lookalike_query, simulate
from drmas.rewards.math import last_boxed
from retrievers import FakeRetriever

KB = {"kind": "generated", "generator": "knowledge", "entities": 120, "train_problems": 200,
      "test_problems": 10, "sources": {"one": {"hops": 1}, "two": {"hops": 2}, "three": {"hops": 3}},
      "similar": 20, "revise_demos": 0.5}


def test_math_revision_rejects_a_wrong_draft_and_the_solver_answers_again():
    rows = [r for r in generate({"a": {"level": 2}, "b": {"level": 3}}, 80, 4, seed=0, revise_demos=0.5)
            if r["split"] == "train"]
    marked = [r for r in rows if r.get("revise")]
    assert 20 < len(marked) < 60
    prompts = PROMPT_SETS["compact"]
    solver, verifier = Solver(prompts), Verifier(prompts)
    traces = math_traces(marked, seed=0, mistake_rate=0.3)
    assert [t[0] for t in traces] == ["solver", "verifier", "solver"] * len(marked)
    for row, (draft, verdict, answer) in zip(marked, zip(*[iter(traces)] * 3)):
        gold = row["answers"][0]
        assert last_boxed(draft[2]) != gold and solver.parse(draft[2]).valid
        assert verifier.parse(verdict[2]).value == "reject"
        assert last_boxed(answer[2]) == gold
        assert draft[2] in answer[1][-1]["content"]     # the second call sees the rejected draft


def test_search_revision_searches_a_lookalike_then_makes_an_extra_hop():
    rows = [r for r in prepare_rows(KB, 0) if r["split"] == "train"]
    docs = {d["contents"].split("\n")[0]: d["contents"].split("\n", 1)[1] for d in prepare_corpus(KB, 0)}
    demos = simulate(rows, seed=0, mistake_rate=0.0, retriever=FakeRetriever(docs), max_turns=5,
                     last_turn="answer")
    revised = [d for d in demos if d.row.get("revise")]
    assert revised and {len(d.row["hops"]) for d in revised} == {1, 2, 3}
    assert any("lookalike" in d.row for d in revised)
    for d in demos:
        searches = [t[2] for t in d.traces if t[0] == "searcher"]
        verdicts = [t[2] for t in d.traces if t[0] == "verifier"]
        answer = [t[2] for t in d.traces if t[0] == "answerer"]
        hops = d.row["hops"]
        assert answer and f"<answer> {d.row['answers'][0]} </answer>" in answer[-1] and d.ep.done
        if not d.row.get("revise"):
            assert d.mistake is None and len(searches) == len(hops)
            continue
        assert d.mistake == "revise" and key_traces(d) == []          # not boosted
        wrong = lookalike_query(hops[0], d.row.get("lookalike"))
        assert wrong != hops[0] and searches[0].endswith(f"<search> {wrong} </search>")
        if "lookalike" in d.row:
            assert wrong.endswith(d.row["lookalike"]) and wrong in docs     # a real passage, the wrong one
        assert verdicts[:2] == ["<verify>no</verify>"] * 2             # "no" after the wrong search
        assert len(searches) == len(hops) + 1                          # the extra hop
        assert [s.split("<search> ")[1].split(" </search>")[0] for s in searches[1:]] == hops
    three = [d for d in demos if len(d.row["hops"]) == 3 and not d.row.get("revise")]
    for d in three:     # each search states the fact just read: the bridges, in order
        searches = [t[2] for t in d.traces if t[0] == "searcher"]
        for bridge, text in zip(d.row["bridges"], searches[1:]):
            assert f" is {bridge}. <search>" in text


def test_no_revision_where_the_turns_do_not_leave_room_for_the_extra_hop():
    rows = [r for r in prepare_rows(KB, 0) if r["split"] == "train" and r.get("revise")
            and len(r["hops"]) == 3][:10]
    docs = {d["contents"].split("\n")[0]: d["contents"].split("\n", 1)[1] for d in prepare_corpus(KB, 0)}
    demos = simulate(rows, seed=0, mistake_rate=0.0, retriever=FakeRetriever(docs), max_turns=4,
                     last_turn="answer")
    assert rows and all(d.mistake is None for d in demos)


def test_withholding_verifier_says_no_to_the_end_and_the_episode_has_no_answer():
    spec = {**KB, "similar": 0, "revise_demos": 0, "withhold_demos": 0.5}
    rows = [r for r in prepare_rows(spec, 0) if r["split"] == "train"]
    docs = {d["contents"].split("\n")[0]: d["contents"].split("\n", 1)[1] for d in prepare_corpus(spec, 0)}
    for last_turn in ("verify", "answer"):
        demos = simulate(rows, seed=0, mistake_rate=0.0, retriever=FakeRetriever(docs), max_turns=4,
                         last_turn=last_turn)
        held = [d for d in demos if d.row.get("withhold")]
        assert 30 < len(held) < 170
        for d in demos:
            verdicts = [t[2] for t in d.traces if t[0] == "verifier"]
            searches = [t[2].split("<search> ")[1].split(" </search>")[0]
                        for t in d.traces if t[0] == "searcher"]
            answers = [t for t in d.traces if t[0] == "answerer"]
            if not d.row.get("withhold"):
                assert d.mistake is None and d.ep.done and answers
                assert last_turn == "answer" or verdicts[-1] == "<verify>yes</verify>"
                continue
            assert d.mistake == "withhold" and key_traces(d) == []
            assert set(verdicts) == {"<verify>no</verify>"}
            hops = d.row["hops"]           # the hops in order, then the last one again
            assert searches == (hops + [hops[-1]] * 3)[:3]
            if last_turn == "verify":      # the last "no": no Searcher, no answer
                assert len(verdicts) == 4 and not answers and not d.ep.done
            else:                          # the Answerer answers on the last turn
                assert len(verdicts) == 3 and len(answers) == 1 and d.ep.done
