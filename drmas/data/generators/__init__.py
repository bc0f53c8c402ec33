"""Seeded generators of `kind: generated` datasets, one module each.

A module registers `fn(spec, seed) -> prepared rows` with `@GENERATORS.register(name)` and,
when its suite searches a corpus it makes, `fn(spec, seed) -> [{"id", "contents"}]` with
`@CORPORA.register(name)` (drmas/registry.py); `generator: name` in a benchmark file picks it.
"""
