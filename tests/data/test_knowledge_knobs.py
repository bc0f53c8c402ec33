"""The knowledge generator's difficulty knobs: three hops, look-alike entities, the share of
multi-hop train rows, rows marked for revision demonstrations; bad options in one line."""

import re

import pytest
import yaml

from drmas.data.generators.knowledge import build_kb, documents, generate
from drmas.data.prepare import check_names, prepare_corpus, prepare_rows
from drmas.errors import ConfigError
from repo import REPO

SPEC = {"kind": "generated", "generator": "knowledge", "entities": 120, "train_problems": 300,
        "test_problems": 20, "sources": {"kb-single": {"hops": 1}, "kb-three": {"hops": 3}},
        "similar": 12}
QUESTION = re.compile(r"^(?:What|Who) is the (.+)\?$")


@pytest.fixture(scope="module")
def rows():
    return prepare_rows(SPEC, seed=0)


@pytest.fixture(scope="module")
def facts():
    """Title -> the value its one passage states (and each title is one passage's)."""
    docs = prepare_corpus(SPEC, seed=0)
    titles = [d["contents"].split("\n")[0] for d in docs]
    assert len(set(titles)) == len(titles)
    out = {}
    for d in docs:
        title, text = d["contents"].split("\n")
        out[title] = text.removeprefix(f"The {title} is ").removesuffix(".")
    return out


def test_a_k_hop_answer_is_reached_only_through_k_facts(rows, facts):
    """Parse "the A of the R2 of the R1 of X" from the question alone, resolve it through
    the corpus one passage at a time: k lookups, each title formed from the previous answer,
    no intermediate entity named in the question, the last lookup states the gold answer."""
    names = {t.split(" of ", 1)[1] for t in facts}
    for r in rows:
        k = {"kb-single": 1, "kb-three": 3}[r["data_source"]]
        phrase = QUESTION.match(r["question"]).group(1)
        parts = phrase.split(" of the ")
        attrs, entity = [p for p in parts[:-1]] + [parts[-1].split(" of ")[0]], parts[-1].split(" of ", 1)[1]
        assert len(attrs) == k and entity in names
        current, path = entity, []
        for attr in reversed(attrs):
            title = f"{attr} of {current}"
            path.append(title)
            current = facts[title]
        assert path == r["hops"] and current == r["answers"][0]
        bridges = r.get("bridges", [r["bridge"]] if r["bridge"] else [])
        assert [facts[t] for t in path[:-1]] == bridges and len(bridges) == k - 1
        for b in bridges:                     # only reading a passage names the next entity
            assert b not in r["question"] and b != entity and b != r["answers"][0]
        assert r["answers"][0] != entity
    assert sum(r["data_source"] == "kb-three" and r["split"] == "test" for r in rows) == 20


def test_similar_adds_lookalikes_one_letter_and_one_fact_apart(rows, facts):
    kb = build_kb(120, seed=0, similar=12)
    plain = build_kb(120, seed=0)
    assert list(kb)[:120] == list(plain) and len(kb) == 132
    looks = list(kb.values())[120:]
    for e in looks:
        original = kb[e.twin]
        assert original.twin == e.name and e.kind == original.kind in ("person", "org")
        assert len(e.name) == len(original.name)
        assert sum(a != b for a, b in zip(e.name, original.name)) == 1
        assert e.attrs.keys() == original.attrs.keys()
        assert sum(e.attrs[a] != original.attrs[a] for a in e.attrs) == 1
        assert {k: v for k, v in plain[original.name].attrs.items()} == original.attrs
        for attr, value in e.attrs.items():                # in the corpus, as any entity
            assert facts[f"{attr} of {e.name}"] == value
    assert len(documents(kb)) == len(documents(plain)) + sum(len(e.attrs) for e in looks)
    asked = [r for r in rows if "lookalike" in r]
    assert asked and all(kb[r["lookalike"]].twin in r["question"] for r in asked)


def test_multi_share_splits_the_train_rows_between_single_and_multi_hop():
    sources = {"one": {"hops": 1}, "two": {"hops": 2}, "three": {"hops": 3}}
    rows = generate(sources, 400, 10, seed=0, entities=120, multi_share=0.8)
    train = {s: sum(r["data_source"] == s and r["split"] == "train" for r in rows) for s in sources}
    assert train == {"one": 80, "two": 160, "three": 160}
    assert all(sum(r["data_source"] == s and r["split"] == "test" for r in rows) == 10 for s in sources)
    with pytest.raises(ConfigError, match="multi_share needs single-hop and multi-hop sources"):
        generate({"two": {"hops": 2}}, 100, 10, seed=0, entities=120, multi_share=0.5)


def test_revise_demos_marks_train_rows_and_changes_nothing_else():
    spec = {**SPEC, "similar": 0}
    plain, marked = prepare_rows(spec, 0), prepare_rows({**spec, "revise_demos": 0.3}, 0)
    assert [{k: v for k, v in r.items() if k != "revise"} for r in marked] == plain
    assert {r["split"] for r in marked if r.get("revise")} == {"train"}


BAD = [
    ({"sources": {"kb-single": {"hops": 1, "hop": 2}}},
     r"datasets\.default\.sources\.kb-single: unknown option\(s\) hop; known: hops$"),
    ({"similiar": 3}, r"datasets\.default: unknown option\(s\) similiar for the knowledge generator; known: .*"),
    ({"sources": {"kb-single": {"hops": 4}}}, r"datasets\.default\.sources\.kb-single\.hops: must be 1, 2 or 3, got 4$"),
    ({"multi_share": 1.5}, r"datasets\.default\.multi_share: must be a number from 0 to 1"),
    ({"similar": -1}, r"datasets\.default\.similar: must be an integer >= 0"),
    ({"sources": ["kb-single"]}, r"datasets\.default\.sources: must be a non-empty mapping of data_source -> options$"),
    ({"sources": {"kb-single": 1}}, r"datasets\.default\.sources\.kb-single: must be a mapping of options \(hops: 1\), got 1$"),
    ({"withhold_demos": -0.5}, r"datasets\.default\.withhold_demos: must be a number from 0 to 1, got -0\.5$"),
]


@pytest.mark.parametrize("change,message", BAD)
def test_unknown_or_bad_options_are_refused_in_one_line_when_the_file_loads(change, message):
    """`check_names` is what `load_suite` runs on every datasets entry of a benchmark file."""
    spec = dict(yaml.safe_load((REPO / "benchmarks" / "search.yaml").read_text())["datasets"]["default"])
    spec.update(change)
    with pytest.raises(ConfigError, match=rf"^benchmarks/search.yaml: {message}") as err:
        check_names(spec, "benchmarks/search.yaml: datasets.default")
    assert "\n" not in str(err.value)


def test_the_commented_examples_in_search_yaml_load_and_generate():
    text = (REPO / "benchmarks" / "search.yaml").read_text()
    for key in ("kb-three:", "similar:", "multi_share:", "revise_demos:", "withhold_demos:"):
        line = next(l for l in text.splitlines() if l.strip().startswith(f"# {key}"))
        text = text.replace(line, line.replace("# ", "", 1))
    spec = yaml.safe_load(text)["datasets"]["default"]
    check_names(spec, "search.yaml: datasets.default")
    spec = dict(spec, entities=120, train_problems=200, test_problems=10)
    rows = prepare_rows(spec, 0)
    assert {r["data_source"] for r in rows} == {"kb-single", "kb-multi", "kb-three"}
    assert any(r.get("revise") for r in rows) and any("lookalike" in r for r in rows)
    assert any(r.get("withhold") for r in rows)


def test_withhold_demos_marks_train_rows_and_changes_nothing_else():
    spec = {**SPEC, "similar": 0}
    plain = prepare_rows(spec, 0)
    both = prepare_rows({**spec, "revise_demos": 0.3, "withhold_demos": 0.5}, 0)
    revised = prepare_rows({**spec, "revise_demos": 0.3}, 0)
    assert [{k: v for k, v in r.items() if k != "withhold"} for r in both] == revised
    assert [{k: v for k, v in r.items() if k not in ("withhold", "revise")} for r in both] == plain
    marked = [r for r in both if r.get("withhold")]
    assert {r["split"] for r in marked} == {"train"}
    train = sum(r["split"] == "train" for r in both)
    assert 0.4 < len(marked) / train < 0.6
