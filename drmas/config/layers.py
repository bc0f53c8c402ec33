"""Where a resolved profile comes from: profile files merged in order, then `KEY=VALUE`
command-line overrides (Snakemake's `--config` form), with the source of every key kept for
`drmas config show` (ARCHITECTURE.md, "Configuration")."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Iterable

import yaml

from drmas.data.bounded_yaml import load_bounded
from drmas.data.io import read_yaml as _read_yaml
from drmas.errors import ConfigError


def read_mapping(path: str | Path, what: str = "config file") -> dict:
    """A YAML mapping from a file; one-line errors for a missing file, bad YAML (file:line),
    a document that is not a mapping."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{what} not found: {path}")
    raw = _read_yaml(path, what=what)
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return raw


def parse_overrides(entries: Iterable[str]) -> dict:
    """`KEY=VALUE` command-line overrides (Snakemake's `--config` form) as a nested dict;
    each VALUE is read as YAML, so lists and mappings work: `seeds=[0,1,2]`,
    `eval={n: 8}`, `train={lr: 5.0e-4}`."""
    out: dict = {}
    for entry in entries:
        key, sep, value = entry.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override {entry!r}: expected KEY=VALUE")
        try:
            parsed = load_bounded(value, f"override {key.strip()}=...") if value.strip() else None
        except yaml.YAMLError as exc:
            raise ConfigError(f"override {entry!r}: value is not valid YAML "
                              f"({getattr(exc, 'problem', None) or exc})") from None
        deep_merge(out, {key.strip(): parsed})
    return out


def deep_merge(base: dict, update: dict, source: str | None = None, provenance: dict | None = None,
               prefix: str = "") -> dict:
    """Merge `update` into `base` in place (mappings merged key by key, anything else
    replaced); record `source` for every leaf set in `provenance` (dotted paths)."""
    for key, value in update.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            deep_merge(base[key], value, source, provenance, path + ".")
        else:
            base[key] = copy.deepcopy(value)
            if provenance is not None:
                for leaf in _leaves(value, path):
                    provenance[leaf] = source
    return base


def _leaves(value: Any, path: str) -> list[str]:
    if isinstance(value, dict) and value:
        return [leaf for k, v in value.items() for leaf in _leaves(v, f"{path}.{k}")]
    return [path]


def read_profiles(files: Iterable[str | Path]) -> tuple[dict, dict]:
    """(raw profile, provenance) from profile files merged in order; provenance maps each
    dotted key a file set to `profile <file>`."""
    raw: dict = {}
    provenance: dict[str, str] = {}
    for path in files:
        deep_merge(raw, read_mapping(path), f"profile {path}", provenance)
    return raw, provenance
