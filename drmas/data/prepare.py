"""Dataset preparation: a suite's `datasets:` entry -> prepared rows (train and test).

`kind: generated` runs a seeded generator registered in GENERATORS; `kind: hub` loads the
paper's datasets (or local copies given as `path:`) through drmas.data.hub.
"""

from __future__ import annotations

from typing import Callable

from drmas.errors import ConfigError

GENERATORS: dict[str, Callable[..., list[dict]]] = {}
CORPORA: dict[str, Callable[..., list[dict]]] = {}


def generator(name: str):
    """Register `fn(spec, seed) -> prepared rows` as the generator `name`."""
    def deco(fn):
        GENERATORS[name] = fn
        return fn
    return deco


def corpus(name: str):
    """Register `fn(spec, seed) -> [{"id", "contents"}]`: the retrieval corpus of generator `name`."""
    def deco(fn):
        CORPORA[name] = fn
        return fn
    return deco


def prepare_corpus(spec: dict, seed: int) -> list[dict] | None:
    """The corpus documents a generated suite searches, or None when it has none."""
    if spec.get("kind") != "generated":
        return None
    _load_generators()
    fn = CORPORA.get(spec.get("generator"))
    return fn(spec, seed) if fn else None


@generator("arithmetic")
def _arithmetic(spec: dict, seed: int) -> list[dict]:
    from drmas.data.arithmetic import generate
    return generate(spec["sources"], int(spec["train_problems"]), int(spec["test_problems"]), seed)


def prepare_rows(spec: dict, seed: int) -> list[dict]:
    """All prepared rows (both splits) described by one `datasets:` entry."""
    kind = spec.get("kind")
    if kind == "generated":
        name = spec.get("generator")
        if name not in GENERATORS:
            _load_generators()
        if name not in GENERATORS:
            raise ConfigError(f"unknown generator {name!r}; known: {', '.join(sorted(GENERATORS))}")
        return GENERATORS[name](spec, seed)
    if kind == "hub":
        from drmas.data.hub import load_source

        rows = []
        for split in ("train", "test"):
            for src in spec.get(split, []):
                rows += load_source(src["source"], path=src.get("path"), split=split,
                                    limit=src.get("limit"))
        return rows
    raise ConfigError(f"datasets entry has unknown kind {kind!r}; known: generated, hub")


def _load_generators() -> None:
    """Generators living in optional modules register themselves on import."""
    import importlib

    for module in ("drmas.data.knowledge",):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError:
            pass
