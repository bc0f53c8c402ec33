"""Option checks every generator's `check_spec` shares: a benchmark entry's own keys and the
shape of its `sources` mapping, each wrong one a one-line ConfigError naming its key."""

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
