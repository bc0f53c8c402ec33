"""Corpus sources of a `datasets:` entry (`corpus: {source: NAME, path: ...}`): wiki-18 from a
local JSONL (plain or gzipped) becomes the corpus contract's rows; from the hub, a missing
`datasets` package or an unreachable hub (there is no network here) is one line naming the
hub id and the `path:` override, at the prepare step."""

from __future__ import annotations

import gzip
import json
import sys
import types

import pytest
import yaml

from drmas.cli import main as cli
from drmas.data import hub
from drmas.data.io import write_jsonl
from drmas.data.prepare import prepare_corpus
from drmas.errors import ConfigError, DataError
from drmas.retrieval.index import validate_corpus
from repo import REPO as ROOT

HUB_ID = "PeterJinGo/wiki-18-corpus"

# wiki-18's own shape: string ids, quoted titles, 100-word passages; plus what a hand-made
# copy may hold: an integer id, an extra field, a blank line, a title/text record.
RECORDS = [
    {"id": "0", "contents": '"Aaron"\nAaron Aaron ( or ; "Ahärôn") is a prophet, high priest.'},
    {"id": "1", "contents": '"Aaron"\nthe brother of Moses in the Hebrew Bible.'},
    {"id": 2, "contents": '"Ada Lovelace"\nAugusta Ada King, Countess of Lovelace.', "url": "x"},
    {"id": "3", "title": "Zeta", "text": "Zeta is the sixth letter of the Greek alphabet."},
]
EXPECTED = [
    {"id": "0", "contents": '"Aaron"\nAaron Aaron ( or ; "Ahärôn") is a prophet, high priest.'},
    {"id": "1", "contents": '"Aaron"\nthe brother of Moses in the Hebrew Bible.'},
    {"id": "2", "contents": '"Ada Lovelace"\nAugusta Ada King, Countess of Lovelace.'},
    {"id": "3", "contents": "Zeta\nZeta is the sixth letter of the Greek alphabet."},
]


def wiki18_text() -> str:
    lines = [json.dumps(r, ensure_ascii=False) for r in RECORDS]
    return "\n".join(lines[:2] + [""] + lines[2:]) + "\n"


def entry(**corpus) -> dict:
    return {"kind": "hub", "corpus": {"source": "wiki18", **corpus}}


def test_wiki18_local_jsonl_becomes_corpus_rows(tmp_path):
    plain = tmp_path / "wiki-18.jsonl"
    plain.write_text(wiki18_text(), encoding="utf-8")
    packed = tmp_path / "wiki-18.jsonl.gz"
    packed.write_bytes(gzip.compress(wiki18_text().encode()))
    docs = prepare_corpus(entry(path=str(plain)), seed=0)
    assert not isinstance(docs, list)                     # streamed, not held
    assert list(docs) == EXPECTED
    assert list(prepare_corpus(entry(path=str(packed)), seed=0)) == EXPECTED
    write_jsonl(tmp_path / "corpus.jsonl", prepare_corpus(entry(path=str(plain)), seed=0))
    assert validate_corpus(tmp_path / "corpus.jsonl") == 4   # what `drmas index` reads


@pytest.mark.parametrize("line, message", [
    ('{"id": "0"}', r"wiki-18.jsonl:2: 'contents' must be non-empty text"),
    ('{"id": true, "contents": "T\\nx"}', r"wiki-18.jsonl:2: 'id' must be a non-empty string or an integer"),
    ('{"id": "0", "contents": "T\\nx"', r"wiki-18.jsonl:2: not valid JSON"),
])
def test_malformed_wiki18_record_names_file_and_line(tmp_path, line, message):
    file = tmp_path / "wiki-18.jsonl"
    file.write_text("\n" + line + "\n")                     # a blank line first
    with pytest.raises(DataError, match=message):
        list(prepare_corpus(entry(path=str(file)), seed=0))


def test_corpus_entry_errors(tmp_path):
    with pytest.raises(DataError, match=r"datasets corpus wiki18: .*nope.jsonl: file not found"):
        prepare_corpus(entry(path=str(tmp_path / "nope.jsonl")), seed=0)
    with pytest.raises(ConfigError, match=r"unknown corpus 'wiki19'; known: wiki18, wiki_offline "
                                          r"\(path: package\) \(or give a local path:\)"):
        prepare_corpus({"kind": "hub", "corpus": {"source": "wiki19"}}, seed=0)
    with pytest.raises(ConfigError, match="datasets corpus wiki18: unknown option.s. limit"):
        prepare_corpus(entry(limit=5), seed=0)


def one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text
    assert HUB_ID in text and "path:" in text
    return text


def test_wiki18_hub_without_datasets_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)           # `import datasets` fails
    with pytest.raises(DataError) as exc:
        prepare_corpus(entry(), seed=0)
    assert "needs the `datasets` package" in one_line(exc)


def fake_datasets(load_dataset) -> types.ModuleType:
    module = types.ModuleType("datasets")
    module.load_dataset = load_dataset
    return module


def test_wiki18_hub_offline_is_one_line(monkeypatch):
    calls = []

    def offline(*args, **kwargs):
        calls.append((args, kwargs))
        raise ConnectionError("Couldn't reach 'PeterJinGo/wiki-18-corpus' on the Hub\n(offline)")

    monkeypatch.setitem(sys.modules, "datasets", fake_datasets(offline))
    with pytest.raises(DataError) as exc:
        prepare_corpus(entry(), seed=0)              # fails before anything is streamed
    text = one_line(exc)
    assert "could not load corpus PeterJinGo/wiki-18-corpus (split train)" in text
    assert "ConnectionError" in text and "offline?" in text
    assert calls == [((HUB_ID, None), {"split": "train", "streaming": True})]


def test_wiki18_hub_stream_is_converted_and_a_dropped_stream_is_one_line(monkeypatch):
    def stream(records, fail_after):
        for i, record in enumerate(records):
            if i == fail_after:
                raise TimeoutError("read timed out")
            yield record

    monkeypatch.setitem(sys.modules, "datasets", fake_datasets(lambda *a, **k: stream(RECORDS, 99)))
    assert list(prepare_corpus(entry(), seed=0)) == EXPECTED
    monkeypatch.setitem(sys.modules, "datasets", fake_datasets(lambda *a, **k: stream(RECORDS, 2)))
    docs = prepare_corpus(entry(), seed=0)
    with pytest.raises(DataError) as exc:
        list(docs)
    assert "TimeoutError: read timed out" in one_line(exc)
    monkeypatch.setitem(sys.modules, "datasets", fake_datasets(lambda *a, **k: [RECORDS[0], {"id": "9"}]))
    with pytest.raises(DataError, match=r"^PeterJinGo/wiki-18-corpus\[train\] record 2: 'contents'"):
        list(prepare_corpus(entry(), seed=0))


# -- at the prepare step ------------------------------------------------------------------------
#: the `datasets:` entry of benchmarks/search.yaml that the default profile's search reads
ENTRY = yaml.safe_load((ROOT / "config" / "default.yaml").read_text())["datasets"]["search"]


def search_suite(tmp_path, corpus: dict | None) -> str:
    """benchmarks/search.yaml with the default profile's entry (`ENTRY`) replaced by a hub
    entry of local questions and `corpus`."""
    questions = tmp_path / "qa.jsonl"
    questions.write_text(json.dumps({"question": "Who was Aaron's brother?", "answers": ["Moses"]}) + "\n")
    held_out = tmp_path / "qa_test.jsonl"        # another question: prepare refuses a leak
    held_out.write_text(json.dumps({"question": "Who was Moses' sister?", "answers": ["Miriam"]}) + "\n")
    spec = yaml.safe_load((ROOT / "benchmarks" / "search.yaml").read_text())
    spec["datasets"][ENTRY] = {"kind": "hub", "train": [{"source": "qa", "path": str(questions)}],
                               "test": [{"source": "qa", "path": str(held_out)}]}
    if corpus is not None:
        spec["datasets"][ENTRY]["corpus"] = corpus
    path = tmp_path / "search.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


def prepare(capsys, suite, out) -> tuple[int, list[str]]:
    status = cli.main(["prepare", "--config", str(ROOT / "config" / "default.yaml"),
                       "--suite", suite, "--out", str(out)])
    return status, [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def test_prepare_writes_a_local_wiki18_corpus(tmp_path, capsys):
    wiki = tmp_path / "wiki-18.jsonl"
    wiki.write_text(wiki18_text())
    out = tmp_path / "data"
    status, err = prepare(capsys, search_suite(tmp_path, {"source": "wiki18", "path": str(wiki)}), out)
    assert status in (0, None), err
    assert [json.loads(line) for line in (out / "corpus.jsonl").read_text().splitlines()] == EXPECTED


def test_prepare_fails_in_one_line_when_the_hub_corpus_is_out_of_reach(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)
    out = tmp_path / "data"
    status, err = prepare(capsys, search_suite(tmp_path, {"source": "wiki18"}), out)
    assert status == 2 and len(err) == 1
    assert HUB_ID in err[0] and "path:" in err[0]
    assert not (out / "corpus.jsonl").exists()


def test_prepare_refuses_a_searching_suite_without_corpus(tmp_path, capsys):
    status, err = prepare(capsys, search_suite(tmp_path, None), tmp_path / "data")
    assert status == 2 and len(err) == 1
    assert "names no corpus to search; add `corpus: {source: NAME}`" in err[0]


def test_paper_search_entry_names_wiki18():
    spec = yaml.safe_load((ROOT / "benchmarks" / "search.yaml").read_text())
    assert spec["datasets"]["paper"]["corpus"] == {"source": "wiki18"}
    assert hub.CORPUS_SOURCES["wiki18"].hub_id == HUB_ID
