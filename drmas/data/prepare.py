"""Dataset preparation: a suite's `datasets:` entry -> prepared rows (train and test).

`kind: generated` runs a seeded generator registered in `drmas.registry.GENERATORS` (modules
of drmas/data/generators/); `kind: hub` loads the paper's datasets (or local copies given as
`path:`) through drmas.data.hub.
"""

from __future__ import annotations

from drmas.errors import ConfigError
from drmas.registry import CORPORA, GENERATORS


def prepare_corpus(spec: dict, seed: int) -> list[dict] | None:
    """The corpus documents a generated suite searches, or None when it has none."""
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
            for src in spec.get(split, []):
                rows += load_source(src["source"], path=src.get("path"), split=split,
                                    limit=src.get("limit"))
        return rows
    raise ConfigError(f"datasets entry has unknown kind {kind!r}; known: generated, hub")
