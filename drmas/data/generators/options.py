"""Option checks every generator's `check_spec` shares: a benchmark entry's own keys, the
shape of its `sources` mapping and of each source's options, and shares from 0 to 1; each
wrong one is a one-line ConfigError naming its key."""

from __future__ import annotations

from drmas.errors import ConfigError


def checked_sources(spec: dict, where: str, generator: str, entry_options) -> dict:
    """The entry's `sources` mapping, after checking the entry has no key outside
    `entry_options` and that `sources` is a non-empty mapping (each source's own options are
    the generator's to check)."""
    unknown = sorted(set(spec) - set(entry_options))
    if unknown:
        raise ConfigError(f"{where}: unknown option(s) {', '.join(map(str, unknown))} for the "
                          f"{generator} generator; known: {', '.join(entry_options)}")
    sources = spec.get("sources")
    if not isinstance(sources, dict) or not sources:
        raise ConfigError(f"{where}.sources: must be a non-empty mapping of data_source -> options")
    return sources


def checked_source(conf, where: str, source_options, example: str) -> dict:
    """One source's options, after checking they are a mapping (`example` shows one in the
    error) with no key outside `source_options`; their values are the generator's to check."""
    if not isinstance(conf, dict):
        raise ConfigError(f"{where}: must be a mapping of options ({example}), got {conf!r}")
    unknown = sorted(set(conf) - set(source_options))
    if unknown:
        raise ConfigError(f"{where}: unknown option(s) {', '.join(map(str, unknown))}; "
                          f"known: {', '.join(source_options)}")
    return conf


def checked_share(spec: dict, key: str, where: str) -> float:
    """The entry's share `key` (0 when absent), checked to be a number from 0 to 1."""
    share = spec.get(key, 0)
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share <= 1:
        raise ConfigError(f"{where}.{key}: must be a number from 0 to 1, got {share!r}")
    return float(share)
