"""The fictional knowledge base: determinism, answerability from the corpus, splits, and
retrieval of every entity by its title on a real (small) pyserini index."""

import random

import pytest

from drmas.data.io import validate_prepared
from drmas.data.generators.knowledge import (ANSWER_TYPES, ATTRS, balanced_split, build_kb, documents,
                                             generate, questions)
from drmas.data.prepare import prepare_corpus, prepare_rows
from drmas.errors import ConfigError
from drmas.rewards.qa import normalize_answer
from knowledge import SPEC, knowledge_index


@pytest.fixture(scope="module")
def rows():
    return prepare_rows(SPEC, seed=0)


@pytest.fixture(scope="module")
def texts():
    """Title -> normalised document text."""
    return {d["contents"].split("\n")[0]: normalize_answer(d["contents"].split("\n", 1)[1])
            for d in prepare_corpus(SPEC, seed=0)}


def test_same_seed_same_kb_rows_and_corpus(rows):
    assert prepare_rows(SPEC, seed=0) == rows
    assert prepare_corpus(SPEC, seed=0) == prepare_corpus(SPEC, seed=0)
    assert prepare_corpus(SPEC, seed=1) != prepare_corpus(SPEC, seed=0)
    assert prepare_rows(SPEC, seed=1) != rows


def test_corpus_form_one_passage_per_fact():
    kb = build_kb(120, seed=0)
    docs = documents(kb)
    assert len(docs) == sum(len(ATTRS[e.kind]) for e in kb.values())
    assert len({e.kind for e in kb.values()}) == 4 and len(kb) == 120
    titles = [d["contents"].split("\n")[0] for d in docs]
    assert len(set(titles)) == len(titles) and len({d["id"] for d in docs}) == len(docs)
    for d in docs:
        title, text = d["contents"].split("\n")
        assert isinstance(d["id"], str) and text.startswith(f"The {title} is ") and text.endswith(".")
    with pytest.raises(ConfigError):
        build_kb(5)


def test_rows_follow_the_contract_and_splits(rows):
    for split in ("train", "test"):
        validate_prepared([r for r in rows if r["split"] == split], split)
    counts = {(s, sp): sum(r["data_source"] == s and r["split"] == sp for r in rows)
              for s in SPEC["sources"] for sp in ("train", "test")}
    assert counts == {("kb-single", "train"): 150, ("kb-single", "test"): 20,
                      ("kb-multi", "train"): 150, ("kb-multi", "test"): 20}
    test_q = {r["question"] for r in rows if r["split"] == "test"}
    assert len(test_q) == 40 and not test_q & {r["question"] for r in rows if r["split"] == "train"}


def test_heldout_rows_are_the_questions_no_other_split_asks(rows):
    """Every question of the pool is in exactly one of test, train (which repeats none while
    the pool lasts) and heldout."""
    split = {sp: [r for r in rows if r["split"] == sp] for sp in ("train", "test", "heldout")}
    validate_prepared(split["heldout"], "heldout")
    asked = {sp: {(r["data_source"], r["question"]) for r in part} for sp, part in split.items()}
    assert not asked["heldout"] & (asked["train"] | asked["test"])
    assert len(asked["heldout"]) == len(split["heldout"]) > 0
    kb, pools = build_kb(120, seed=0), 0
    for hops in (1, 2):
        pools += len({q["question"] for q in questions(kb, hops, random.Random(0))})
    assert len(asked["train"]) + len(asked["test"]) + len(asked["heldout"]) == pools
    assert {r["data_source"] for r in split["heldout"]} <= set(SPEC["sources"])


def test_test_splits_take_answer_types_in_turn(rows):
    """Both sources ask for the same answer types, in every prefix of their test split (the
    profile evaluates the first few), so their columns differ in hops only."""
    kinds = {vt for attrs in ATTRS.values() for vt in attrs.values()}
    assert kinds == set(ANSWER_TYPES)
    test = {s: [r["answer_type"] for r in rows if r["data_source"] == s and r["split"] == "test"]
            for s in SPEC["sources"]}
    for n in (7, 14, 20):
        single, multi = sorted(test["kb-single"][:n]), sorted(test["kb-multi"][:n])
        assert single == multi
        counts = [single.count(t) for t in ANSWER_TYPES]
        assert max(counts) - min(counts) <= 1
    # a type that runs out leaves its turn to the others; the rest keeps the pool's order
    pool = [{"answer_type": t, "i": i} for i, t in enumerate(["year", "year", "year", "city", "river"])]
    test, rest = balanced_split(pool, 4)
    assert [q["i"] for q in test] == [0, 3, 4, 1] and [q["i"] for q in rest] == [2]


def test_every_answer_is_stated_in_the_last_hop_document(rows, texts):
    for r in rows:
        assert len(r["hops"]) == {"kb-single": 1, "kb-multi": 2}[r["data_source"]]
        assert normalize_answer(r["answers"][0]) in texts[r["hops"][-1]], r
        assert r["hops"][0] in r["question"]                     # the first query is in it
        assert normalize_answer(r["answers"][0]) not in map(normalize_answer, r["distractors"])


def test_multi_hop_needs_two_different_documents(rows, texts):
    multi = [r for r in rows if r["data_source"] == "kb-multi"]
    for r in multi:
        first, second = r["hops"]
        assert first != second and second.endswith(f" of {r['bridge']}")
        assert normalize_answer(r["bridge"]) in texts[first]     # doc 1 names the bridge ...
        assert r["bridge"] not in r["question"]                  # ... which the question does not
        assert normalize_answer(r["answers"][0]) != normalize_answer(first)
    # in most questions the answer is not in the first document: it takes the second lookup
    alone = sum(normalize_answer(r["answers"][0]) in texts[r["hops"][0]] for r in multi)
    assert alone < 0.2 * len(multi)


def test_too_few_questions_is_a_config_error():
    with pytest.raises(ConfigError, match="entities"):
        generate({"kb-single": {"hops": 1}}, 10, 500, seed=0, entities=20)


def test_title_search_returns_the_entity_first(tmp_path_factory):
    from drmas.retrieval.searcher import BM25Searcher

    docs, index_dir = knowledge_index(tmp_path_factory)
    titles = [d["contents"].split("\n")[0] for d in docs]
    with BM25Searcher(index_dir) as searcher:
        results = searcher.batch_search(titles, k=3)
    first = sum(bool(hits) and hits[0].title == t for t, hits in zip(titles, results))
    assert first >= 0.95 * len(titles)
