"""Tables in the docs from reference cards: one source for every published number.

A table of a profile's results in README.md or docs/*.md sits between two markers,

    <!-- card: default math -->            (profile, suite, and optionally a table: main,
    | assignment | method | ... |           stats, ablations, stability, behaviour; then
    <!-- /card -->                          optionally a prefix of the columns to keep,
                                            e.g. `main Avg` for the Avg columns alone)

and must be exactly what `render` makes of `results/reference/<profile>.json` (the profile's
reference card): `drmas card results/reference/default.json --render math` prints it, and
tests/report/test_card_docs.py fails when a marked table differs from its card, or when a
marker names a card that does not exist.
"""

from __future__ import annotations

import re
from pathlib import Path

from drmas.errors import DataError

MARKER = re.compile(r"<!--\s*card:\s*(?P<profile>[A-Za-z0-9_-]+)\s+(?P<suite>[A-Za-z0-9_.-]+)"
                    r"(?:\s+(?P<table>[a-z]+)(?:\s+(?P<columns>[^\s>]+))?)?\s*-->\n"
                    r"(?P<body>.*?)<!--\s*/card\s*-->", re.S)
FENCE = re.compile(r"^```.*?^```[^\n]*$", re.S | re.M)
DELTA = "Δ"


def _cell(cell: dict, signed: bool) -> str:
    if "text" in cell:
        return cell["text"]
    v, lo, hi = cell.get("value"), cell.get("lo"), cell.get("hi")
    if v is None:
        return ""
    f = "{:+.1f}" if signed else "{:.1f}"
    if lo is None or hi is None or lo == hi == v:
        return f.format(v)
    return f"{f.format(v)} [{lo:.1f}, {hi:.1f}]"


def render(card: dict, suite: str, table: str = "main", columns: str | None = None) -> str:
    """The Markdown table of `table` of `suite` in `card`: a column per row-key part, then
    one per value column ('mean [lo, hi]' with one decimal, signed on Δ rows and columns;
    with `columns`, only those whose name starts with it), then `seeds` (the row's n)."""
    try:
        t = card["tables"][suite][table]
    except KeyError:
        raise DataError(f"the card of profile {card.get('profile')} has no {table} table for "
                        f"suite {suite}") from None
    prefix = columns
    columns = [c for c in t["columns"] if c.startswith(prefix)] if prefix else t["columns"]
    if not columns:
        raise DataError(f"the {table} table of suite {suite} has no column starting with "
                        f"{prefix!r}")
    seeds = any(r.get("n") is not None for r in t["rows"])
    head = t["index"] + columns + (["seeds"] if seeds else [])
    lines = ["| " + " | ".join(head) + " |",
             "|" + "---|" * len(t["index"]) + "---:|" * (len(head) - len(t["index"]))]
    for row in t["rows"]:
        delta_row = any(k.startswith(DELTA) for k in row["key"])
        cells = [_cell(row["cells"].get(c, {"value": None}), delta_row or c.startswith(DELTA))
                 for c in columns]
        if seeds:
            cells.append("" if row.get("n") is None else str(row["n"]))
        lines.append("| " + " | ".join(list(row["key"]) + cells) + " |")
    return "\n".join(lines) + "\n"


def marked_tables(text: str) -> list[dict]:
    """The marked tables of a Markdown text: profile, suite, table, body (markers inside
    fenced code blocks are examples, not tables)."""
    text = FENCE.sub("", text)
    return [{"profile": m["profile"], "suite": m["suite"], "table": m["table"] or "main",
             "columns": m["columns"], "body": m["body"]} for m in MARKER.finditer(text)]


def check_markdown(path: str | Path, reference_dir: str | Path) -> list[str]:
    """One line per marked table of `path` that differs from its reference card (or whose
    card is missing or lacks the table); empty when every marked table matches."""
    from drmas.report.card import load_card

    problems = []
    for m in marked_tables(Path(path).read_text(encoding="utf-8")):
        spec = " ".join(x for x in (m["table"], m["columns"]) if x)
        where = f"{path}: <!-- card: {m['profile']} {m['suite']} {spec} -->"
        card_file = Path(reference_dir) / f"{m['profile']}.json"
        if not card_file.exists():
            problems.append(f"{where}: no reference card {card_file}")
            continue
        try:
            expected = render(load_card(card_file), m["suite"], m["table"], m["columns"])
        except DataError as e:
            problems.append(f"{where}: {e}")
            continue
        if m["body"].strip() != expected.strip():
            problems.append(f"{where}: differs from {card_file} (print it with `drmas card "
                            f"{card_file} --render {m['suite']}:{spec.replace(' ', ':')}`)")
    return problems
