"""One source for every published number: a table of README.md or docs/*.md marked
`<!-- card: <profile> <suite> [table] -->` ... `<!-- /card -->` must be exactly what its
reference card (results/reference/<profile>.json) renders (drmas/report/cardmd.py); a marker
naming a missing card fails too. Documents without markers pass."""

import json

import pytest

from drmas.report.cardmd import check_markdown, marked_tables, render
from repo import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_marked_tables_match_their_reference_cards(doc):
    assert check_markdown(doc, REPO / "results" / "reference") == []


def test_reference_cards_are_valid():
    from drmas.report.card import load_card

    for path in sorted((REPO / "results" / "reference").glob("*.json")):
        assert load_card(path)["profile"] == path.stem


CARD = {"profile": "p", "tables": {"math": {"main": {
    "file": "tables/math.csv", "sha256": "0", "index": ["assignment", "method"],
    "columns": ["a avg@4", "Avg avg@4"],
    "rows": [{"key": ["shared", "GRPO"], "n": 3,
              "cells": {"a avg@4": {"value": 50.0, "lo": 40.25, "hi": 60.0},
                        "Avg avg@4": {"value": 50.0, "lo": 40.25, "hi": 60.0}}},
             {"key": ["shared", "Δ Dr. MAS − GRPO"], "n": 3,
              "cells": {"a avg@4": {"value": 2.0, "lo": -1.0, "hi": 5.0},
                        "Avg avg@4": {"value": 2.0, "lo": -1.0, "hi": 5.0}}}]}}}}


def test_the_mechanism_on_a_document(tmp_path, monkeypatch):
    import drmas.report.card as card_module

    monkeypatch.setattr(card_module, "validate", lambda card, where="card": None)
    refs = tmp_path / "reference"
    refs.mkdir()
    (refs / "p.json").write_text(json.dumps(CARD))
    table = render(CARD, "math")
    assert "| shared | Δ Dr. MAS − GRPO | +2.0 [-1.0, 5.0] | +2.0 [-1.0, 5.0] | 3 |" in table
    assert "| shared | GRPO | 50.0 [40.2, 60.0] |" in table or "| shared | GRPO | 50.0 [40.3, 60.0] |" in table
    doc = tmp_path / "doc.md"
    doc.write_text(f"# Results\n\n<!-- card: p math -->\n{table}<!-- /card -->\n\nno markers below\n")
    assert [m["table"] for m in marked_tables(doc.read_text())] == ["main"]
    fenced = f"```\n<!-- card: q math -->\n{table}<!-- /card -->\n```\n"
    assert marked_tables(fenced) == []                       # an example, not a table
    assert check_markdown(doc, refs) == []
    doc.write_text(doc.read_text().replace("+2.0 [-1.0, 5.0] | 3", "+2.1 [-1.0, 5.0] | 3"))
    (problem,) = check_markdown(doc, refs)
    assert "differs from" in problem and "--render math:main" in problem
    doc.write_text(f"<!-- card: q math -->\n{table}<!-- /card -->\n")
    (problem,) = check_markdown(doc, refs)
    assert "no reference card" in problem
    doc.write_text(f"<!-- card: p search stats -->\n{table}<!-- /card -->\n")
    (problem,) = check_markdown(doc, refs)
    assert "no stats table for suite search" in problem


def test_a_marker_may_keep_the_columns_of_one_prefix():
    """`<!-- card: default math main Avg -->`: the Avg columns alone, the rest of the table as
    the full rendering has it; a prefix no column has is an error naming it."""
    from drmas.errors import DataError
    from drmas.report.card import load_card

    card = load_card(REPO / "results" / "reference" / "default.json")
    full, avg = render(card, "math"), render(card, "math", "main", "Avg")
    assert avg.splitlines()[0] == "| assignment | method | Avg avg@16 | Avg pass@16 | seeds |"
    assert len(avg.splitlines()) == len(full.splitlines())
    for f, a in zip(full.splitlines()[2:], avg.splitlines()[2:]):
        assert f.split(" | ")[:2] == a.split(" | ")[:2] and f.split(" | ")[-3:] == a.split(" | ")[-3:]
    marked = marked_tables("<!-- card: default math main Avg -->\n" + avg + "<!-- /card -->\n")
    assert [(m["table"], m["columns"]) for m in marked] == [("main", "Avg")]
    with pytest.raises(DataError, match="no column starting with 'Med'"):
        render(card, "math", "main", "Med")
