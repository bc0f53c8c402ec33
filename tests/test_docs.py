"""The documentation reads as a user's: no word of how the project was developed (no "stop N",
no issue numbers, no "session" outside pytest's sense), a short README front page with both
set-up commands near its top, a results page of bounded length, one-line help strings, and
links into docs/results.md and docs/history.md that land on a heading."""

import dataclasses
import re
import typing

from repo import REPO

HISTORY_WORDS = re.compile(r"\bstops? \d+|\bissue #|\bsessions?\b", re.IGNORECASE)
PYTEST_SESSION = re.compile(r"""scope\s*=\s*["']session["']""")
README_COMMANDS = (
    "python3.11 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 && pip install -e . && snakemake --cores all",
    'python3.11 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 && pip install -e ".[test]" && python -m pytest -q',
)


def scanned_files():
    yield REPO / "README.md"
    yield REPO / "ARCHITECTURE.md"
    yield from sorted((REPO / "docs").glob("*.md"))
    yield from sorted(p for p in (REPO / "config").iterdir() if p.is_file())
    yield from sorted((REPO / "drmas").rglob("*.py"))


def test_no_development_history_in_docs_config_or_code():
    found = []
    for path in scanned_files():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            line = PYTEST_SESSION.sub("", line)
            for m in HISTORY_WORDS.finditer(line):
                found.append(f"{path.relative_to(REPO)}:{n}: {m.group(0)!r}: {line.strip()[:100]}")
    assert not found, "development history in user-facing text:\n" + "\n".join(found)


def test_the_check_finds_history_words():
    for text in ("as measured at stop 41", "Stops 37 and 38", "see issue #25", "this session had"):
        assert HISTORY_WORDS.search(text), text
    for text in ("the loss stops at 3 steps", 'scope="session"', "a prefix stops its last layer"):
        assert not HISTORY_WORDS.search(PYTEST_SESSION.sub("", text)), text


def test_readme_is_a_front_page():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 120, len(lines)
    top = "\n".join(lines[:25])
    for command in README_COMMANDS:
        assert command in top, command


def test_results_page_is_bounded():
    lines = (REPO / "docs" / "results.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 350, len(lines)


def config_classes():
    """Every dataclass the profile and benchmark schemas are generated from."""
    from drmas.config.profile import Config
    from drmas.config.suites import Suite

    seen, todo = [], [Config, Suite]
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.append(cls)
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            partial = f.metadata.get("partial")
            if partial:
                todo.append(partial)
            for t in [hints.get(f.name), *typing.get_args(hints.get(f.name))]:
                for u in [t, *typing.get_args(t)]:
                    if dataclasses.is_dataclass(u):
                        todo.append(u)
    return seen


def test_help_strings_are_one_short_line():
    classes = config_classes()
    assert {"Config", "TrainConfig", "ModelSpec", "Suite"} <= {c.__name__ for c in classes}
    long = []
    for cls in classes:
        for f in dataclasses.fields(cls):
            text = f.metadata.get("help")
            if text is None:
                continue
            if len(text) > 120 or "\n" in text:
                long.append(f"{cls.__name__}.{f.name}: {len(text)} characters")
    assert not long, "help strings over one line of 120 characters:\n" + "\n".join(long)


def anchors(path):
    """GitHub's anchors of a Markdown file's headings."""
    out = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


def test_links_into_results_and_history_land_on_a_heading():
    targets = {name: anchors(REPO / "docs" / name) for name in ("results.md", "history.md")}
    broken = []
    for path in scanned_files():
        for m in re.finditer(r"(results|history)\.md#([\w\-]+)", path.read_text(encoding="utf-8")):
            if m.group(2) not in targets[f"{m.group(1)}.md"]:
                broken.append(f"{path.relative_to(REPO)}: {m.group(0)}")
    assert not broken, "links to no heading:\n" + "\n".join(broken)
