"""`drmas verify`: a run's result card against a reference card, row by row.

Every cell of every table row of the reference (drmas/report/card.py) is looked up in the
run's card by (suite, table, row key, column) and called:

- `identical`: the same value and interval (the numbers of the tables' CSVs, 2 decimals);
- `within`: another value, inside the reference's interval [lo, hi];
- `outside`: another value outside it, or another value of a cell without an interval
  whose table has intervals (a count such as `seeds`);
- `differs`: another value of the behaviour table (routing statistics, no interval):
  reported, not counted against the run;
- `missing`: a reference cell the run's card lacks (counted against the run);
- `extra`: a cell only the run has (a table added since the reference; reported only).

`ok` is true when no cell is `outside` or `missing`. Beside the rows: the numerics
fingerprints, CPU, kernels, threads and the package versions side by side, the differences
first, since they are what can explain a row outside.
"""

from __future__ import annotations

from dataclasses import dataclass, field

NO_INTERVAL_TABLES = {"behaviour"}
FAILING = ("outside", "missing")
SHOWN = 12          # rows outside listed in the one-screen summary


@dataclass
class Verdict:
    counts: dict[str, int]
    cells: list[dict]               # every compared cell: suite, table, key, column, status, ...
    environment: list[tuple[str, object, object]]       # (what, run's, reference's)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(self.counts.get(s) for s in FAILING)

    def bad(self) -> list[dict]:
        return [c for c in self.cells if c["status"] in FAILING]


def _cells(card: dict) -> dict[tuple, dict]:
    out = {}
    for suite, tables in card.get("tables", {}).items():
        for table, t in tables.items():
            for row in t["rows"]:
                for column, cell in row["cells"].items():
                    out[(suite, table, tuple(row["key"]), column)] = cell
                if row.get("n") is not None:
                    out[(suite, table, tuple(row["key"]), "n")] = {"value": row["n"]}
    return out


def classify(cell: dict | None, ref: dict, table: str) -> str:
    if cell is None:
        return "missing"
    if cell == ref:
        return "identical"
    if "text" in ref or "text" in cell:
        return "differs" if table in NO_INTERVAL_TABLES else "outside"
    value, lo, hi = cell.get("value"), ref.get("lo"), ref.get("hi")
    if value is not None and ref.get("value") is not None and value == ref["value"] \
            and lo is None and hi is None:
        return "identical"
    if lo is not None and hi is not None and value is not None and lo <= value <= hi:
        return "within"
    return "differs" if table in NO_INTERVAL_TABLES else "outside"


def environment(card: dict, ref: dict) -> list[tuple[str, object, object]]:
    """(what, run, reference) for the machine, numerics and package versions."""
    def get(c, *path):
        for p in path:
            c = (c or {}).get(p) if isinstance(c, dict) else None
        return c

    rows = [("machine", get(card, "machine", "name"), get(ref, "machine", "name")),
            ("cpu", get(card, "machine", "cpu"), get(ref, "machine", "cpu")),
            ("cpu flags", " ".join(get(card, "machine", "cpu_flags") or []),
             " ".join(get(ref, "machine", "cpu_flags") or [])),
            ("numerics fingerprint", get(card, "numerics", "fingerprint"),
             get(ref, "numerics", "fingerprint")),
            ("kernels in use", get(card, "numerics", "kernels"), get(ref, "numerics", "kernels")),
            ("cpu_kernels", card.get("cpu_kernels"), ref.get("cpu_kernels")),
            ("threads", card.get("threads"), ref.get("threads")),
            ("seeds", card.get("seeds"), ref.get("seeds")),
            ("config sha256", (card.get("config_sha256") or "")[:16] or None,
             (ref.get("config_sha256") or "")[:16] or None),
            ("drmas", get(card, "software", "drmas"), get(ref, "software", "drmas")),
            ("git commit", (get(card, "software", "git_commit") or "")[:12] or None,
             (get(ref, "software", "git_commit") or "")[:12] or None),
            ("python", get(card, "software", "python"), get(ref, "software", "python"))]
    packages = sorted(set(get(card, "software", "packages") or {}) | set(get(ref, "software", "packages") or {}))
    rows += [(p, get(card, "software", "packages", p), get(ref, "software", "packages", p))
             for p in packages]
    for suite in sorted(set(card.get("suites", {})) | set(ref.get("suites", {}))):
        a, b = card.get("suites", {}).get(suite) or {}, ref.get("suites", {}).get(suite) or {}
        for name in sorted(set(a.get("data", {})) | set(b.get("data", {}))):
            rows.append((f"{suite} data {name}", (a.get("data", {}).get(name) or "")[:16] or None,
                         (b.get("data", {}).get(name) or "")[:16] or None))
        rows.append((f"{suite} prompts", ((a.get("prompts") or {}).get("sha256") or "")[:16] or None,
                     ((b.get("prompts") or {}).get("sha256") or "")[:16] or None))
        rows.append((f"{suite} tokenizer", (a.get("tokenizer") or "")[:16] or None,
                     (b.get("tokenizer") or "")[:16] or None))
    return rows


def verify(card: dict, ref: dict) -> Verdict:
    mine, theirs = _cells(card), _cells(ref)
    cells, counts = [], {}
    for key, ref_cell in theirs.items():
        status = classify(mine.get(key), ref_cell, key[1])
        counts[status] = counts.get(status, 0) + 1
        suite, table, row, column = key
        cells.append({"suite": suite, "table": table, "key": list(row), "column": column,
                      "status": status, "run": mine.get(key), "reference": ref_cell})
    for key in mine.keys() - theirs.keys():
        counts["extra"] = counts.get("extra", 0) + 1
        suite, table, row, column = key
        cells.append({"suite": suite, "table": table, "key": list(row), "column": column,
                      "status": "extra", "run": mine[key], "reference": None})
    notes = []
    if card.get("profile") != ref.get("profile"):
        notes.append(f"the cards are of different profiles: {card.get('profile')} and "
                     f"{ref.get('profile')}")
    return Verdict(counts, cells, environment(card, ref), notes)


def _cell_text(cell: dict | None) -> str:
    if cell is None:
        return "-"
    if "text" in cell:
        return cell["text"]
    v, lo, hi = cell.get("value"), cell.get("lo"), cell.get("hi")
    text = "null" if v is None else f"{v:g}"
    return text + (f" [{lo:g}, {hi:g}]" if lo is not None and hi is not None else "")


def summary(v: Verdict, run_name: str, ref_name: str) -> str:
    """The one-screen summary: the verdict, the counts, the rows outside (the first
    `SHOWN`), and the machine and software differences that could explain them."""
    order = ("identical", "within", "outside", "missing", "differs", "extra")
    counts = ", ".join(f"{v.counts[s]} {s}" for s in order if v.counts.get(s))
    head = ("REPRODUCED: every reference cell is identical or within its interval"
            if v.ok else "NOT REPRODUCED: cells outside the reference's interval or missing")
    lines = [f"drmas verify: {run_name} against {ref_name}", head, f"cells: {counts or 'none'}"]
    lines += [f"note: {n}" for n in v.notes]
    bad = v.bad()
    for c in bad[:SHOWN]:
        lines.append(f"  {c['status']:8} {c['suite']} {c['table']} {' / '.join(c['key'])} | "
                     f"{c['column']}: {_cell_text(c['run'])} vs {_cell_text(c['reference'])}")
    if len(bad) > SHOWN:
        lines.append(f"  ... and {len(bad) - SHOWN} more (verify.json lists every cell)")
    differ = [(w, a, b) for w, a, b in v.environment if a != b]
    same = [w for w, a, b in v.environment if a == b and a is not None]
    if differ:
        lines.append("differences of machine or versions (this run | reference):")
        lines += [f"  {w}: {a} | {b}" for w, a, b in differ]
    else:
        lines.append("machine, numerics fingerprint, data, prompts and package versions: the same")
    if differ and same:
        key = [w for w in ("numerics fingerprint", "cpu", "torch", "cpu_kernels", "threads") if w in same]
        if key:
            lines.append("the same: " + ", ".join(key))
    return "\n".join(lines) + "\n"


def as_json(v: Verdict) -> dict:
    return {"ok": v.ok, "counts": v.counts, "notes": v.notes,
            "environment": [{"what": w, "run": a, "reference": b} for w, a, b in v.environment],
            "cells": v.cells}
