"""Search warm-start traces: real prompts and real retrieval, mistakes at the requested rate."""

import pytest

from drmas.data.prepare import prepare_rows
from drmas.errors import DataError, DrmasError
from drmas.mas.search.demos import BOOST, MISTAKES, key_traces, search_agents, search_traces, simulate
from drmas.mas.search.history import SearchEpisode
from drmas.mas.search.orchestra import SearchOptions
from drmas.registry import DEMONSTRATIONS
from knowledge import SPEC, knowledge_index  # one index per session, shared

AGENTS = search_agents()        # the compact prompt set's, the tiny models'
ANSWER = SearchOptions(last_turn="answer")     # as `simulate` plays by default


@pytest.fixture(scope="module")
def searcher(tmp_path_factory):
    from drmas.retrieval.searcher import BM25Searcher

    with BM25Searcher(knowledge_index(tmp_path_factory)[1]) as s:
        yield s


@pytest.fixture(scope="module")
def train_rows():
    return [r for r in prepare_rows(SPEC, seed=0) if r["split"] == "train"]


def test_retriever_and_knowledge_rows_are_required(train_rows, searcher):
    with pytest.raises(DrmasError, match="retriever"):
        search_traces(train_rows[:2], seed=0, mistake_rate=0.3, retriever=None)
    hub_row = {"id": "nq-1", "question": "who?", "answers": ["x"]}
    with pytest.raises(DataError, match="nq-1"):
        search_traces(train_rows[:2] + [hub_row], seed=0, mistake_rate=0.3, retriever=searcher)


@pytest.mark.parametrize("prompt_set", ["compact", "smol"])
def test_traces_use_the_agents_prompts(train_rows, searcher, prompt_set):
    demos = simulate(train_rows[:40], seed=0, mistake_rate=0.3, retriever=searcher,
                     prompt_set=prompt_set)
    agents = search_agents(prompt_set)
    for demo in demos:
        replay = SearchEpisode(problem=demo.row)
        history = iter(demo.ep.history)
        for agent, prompt, response in demo.traces:
            assert prompt == agents[agent].prompt(replay)       # what the agent sees at RL time
            if agent == "searcher" or (agent == "answerer" and "<answer>" not in response):
                replay.history.append(next(history))            # a search or a lost answer
        assert next(history, None) is None
    raw = search_traces(train_rows[:40], seed=0, mistake_rate=0.3, retriever=searcher, boost={},
                        options=ANSWER, prompt_set=prompt_set)
    assert raw == [t for d in demos for t in d.traces]
    flat = search_traces(train_rows[:40], seed=0, mistake_rate=0.3, retriever=searcher,
                         options=ANSWER, prompt_set=prompt_set)
    assert flat == [t for d in demos
                    for t in d.traces + [k for k in key_traces(d) for _ in range(BOOST[k[0]])]]
    assert DEMONSTRATIONS.get("search")(train_rows[:40], seed=0, mistake_rate=0.3, retriever=searcher,
                                        options=ANSWER, prompt_set=prompt_set) == flat
    if prompt_set != "compact":      # the same episodes, asked in other words
        compact = search_traces(train_rows[:40], seed=0, mistake_rate=0.3, retriever=searcher,
                                options=ANSWER)
        assert [t[2] for t in compact] == [t[2] for t in flat]
        assert all(a[1] != b[1] for a, b in zip(compact, flat))


def test_mistake_share_is_near_the_rate(train_rows, searcher):
    for rate in (0.0, 0.3):
        demos = simulate(train_rows, seed=1, mistake_rate=rate, retriever=searcher)
        deliberate = [d for d in demos if d.mistake in MISTAKES]
        assert all(d.mistake_done for d in deliberate)
        assert abs(len(deliberate) / len(demos) - rate) < 0.07
        assert sum(d.mistake == "retrieval_miss" for d in demos) <= 0.02 * len(demos)
    assert {d.mistake for d in demos} >= set(MISTAKES)


def test_correct_traces_search_the_hops_and_answer_gold(train_rows, searcher):
    demos = [d for d in simulate(train_rows, seed=0, mistake_rate=0.3, retriever=searcher)
             if d.mistake is None]
    assert demos
    for demo in demos:
        row, traces = demo.row, demo.traces
        queries = [AGENTS["searcher"].parse(r).value for a, _, r in traces if a == "searcher"]
        assert queries == row["hops"][:len(queries)] and len(queries) <= len(row["hops"])
        agent, prompt, response = traces[-1]
        gold = row["answers"][0]
        assert agent == "answerer" and response == f"The {row['hops'][-1]} is {gold}. <answer> {gold} </answer>"
        if len(row["hops"]) == 2:                 # the second query states the bridge fact first
            second = [r for a, _, r in traces if a == "searcher"][1]
            assert second == f"The {row['hops'][0]} is {row['bridge']}. <search> {row['hops'][1]} </search>"
        assert row["answers"][0] in prompt[-1]["content"]          # the answer was retrieved
        assert all(AGENTS["verifier"].parse(r).valid for a, _, r in traces if a == "verifier")


def test_boost_repeats_clean_queries_and_gold_answers(train_rows, searcher):
    demos = simulate(train_rows[:80], seed=0, mistake_rate=0.3, retriever=searcher)
    assert min(BOOST.values()) >= 1
    for demo in demos:
        key = key_traces(demo)
        if demo.mistake is not None:
            assert key == []
            continue
        hops = demo.row["hops"]
        assert [a for a, _, _ in key] == ["searcher"] * len(hops) + ["answerer"]
        (_, s_prompt, query) = key[0]
        assert query == f"<search> {hops[0]} </search>"
        assert "No searches yet." in s_prompt[-1]["content"]        # the first turn
        assert key[-1][2].endswith(f"<answer> {demo.row['answers'][0]} </answer>")
    raw = search_traces(train_rows[:80], seed=0, mistake_rate=0.3, retriever=searcher, boost={},
                        options=ANSWER)
    flat = search_traces(train_rows[:80], seed=0, mistake_rate=0.3, retriever=searcher, options=ANSWER)
    share = [sum(a == "answerer" for a, _, _ in t) / len(t) for t in (raw, flat)]
    assert share[1] > 1.5 * share[0]


def test_demos_follow_the_mas_control_flow(train_rows, searcher):
    """No Verifier on the last turn; an untagged answer loses the turn and the episode goes on."""
    demos = simulate(train_rows[:300], seed=0, mistake_rate=0.3, retriever=searcher, max_turns=4)
    for demo in demos:
        turns = demo.ep.turns
        assert not any(t.agent == "verifier" and t.turn == 3 for t in turns)
        answers = [t for t in turns if t.agent == "answerer"]
        assert all(t.action.value is None for t in answers[:-1])
        assert demo.ep.done == (bool(answers) and answers[-1].action.value is not None)
        assert answers, "every episode reaches an Answerer by the last turn"
    retried = [d for d in demos if d.broken == "answerer" and d.ep.done]
    assert retried and all(sum(t.agent == "answerer" for t in d.ep.turns) == 2 for d in retried)


def test_demos_follow_a_verified_last_turn(train_rows, searcher):
    """`last_turn="verify"`: the Verifier judges the last turn too, "yes" only with every hop's
    passage in; a "no" there ends the episode without an Answerer or Searcher call. The first
    three turns are the same demonstrations as under `answer`."""
    rows = train_rows[:300]
    verified = simulate(rows, seed=0, mistake_rate=0.3, retriever=searcher, last_turn="verify")
    answered = simulate(rows, seed=0, mistake_rate=0.3, retriever=searcher)
    reached = 0
    for v, a in zip(verified, answered):
        assert [tr for tr, t in zip(v.traces, v.ep.turns) if t.turn < 3] == \
               [tr for tr, t in zip(a.traces, a.ep.turns) if t.turn < 3]
        last = [t for t in v.ep.turns if t.turn == 3]
        if not last:
            continue
        reached += 1
        assert last[0].agent == "verifier" and not any(t.agent == "searcher" for t in last)
        says_yes = last[0].action.value == "yes"
        assert says_yes == (v.needed() is None)
        assert [t.agent for t in last] == (["verifier", "answerer"] if says_yes else ["verifier"])
        assert v.ep.done == (says_yes and last[-1].action.value is not None)
    assert reached, "some demonstrations reach the last turn"
    with pytest.raises(ValueError, match="last_turn"):
        simulate(rows[:1], seed=0, mistake_rate=0.3, retriever=searcher, last_turn="nope")
    # the registered builder (what `drmas warmstart` and `drmas tokenizer` call) plays the MAS's
    # options: the search benchmark's by default (`verify`)
    verify = DEMONSTRATIONS.get("search")(rows[:40], seed=0, mistake_rate=0.3, retriever=searcher,
                                          boost={}, options=SearchOptions())
    assert verify == [t for d in verified[:40] for t in d.traces]
    answer = DEMONSTRATIONS.get("search")(rows[:40], seed=0, mistake_rate=0.3, retriever=searcher,
                                          boost={}, options=ANSWER)
    assert answer == [t for d in answered[:40] for t in d.traces]
