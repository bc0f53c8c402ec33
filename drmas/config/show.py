"""`drmas config show` / `drmas config schema`: a resolved profile with the source of every
value, and the generated JSON-Schema.

A value comes from one of four layers, later ones winning: `default` (drmas/config/profile.py),
`profile <file>`, `suite_overrides.<suite>` (with `--suite`), `command line`. (A method's
`method_defs.<name>.train` sits between the last two; `config show` shows no method.)
"""

from __future__ import annotations

from typing import Any, Iterable

import yaml

from drmas.config.layers import parse_overrides, read_profiles
from drmas.config.profile import config_schema, from_dict
from drmas.config.suites import suite_schema
from drmas.errors import ConfigError

HEADER = ("# Generated from the dataclasses in drmas/config/profile.py by `drmas config schema`; do not "
          "edit by hand.\n# Every key of a profile, its type, default and help text.\n")


class _NoAliases(yaml.SafeDumper):
    """Writes a sub-schema shared by several keys in full at each (no &id anchors)."""

    def ignore_aliases(self, data):
        return True


def schema_yaml(suite: bool = False) -> str:
    schema = suite_schema() if suite else config_schema()
    return HEADER + yaml.dump(schema, Dumper=_NoAliases, sort_keys=False, allow_unicode=True,
                              width=100)


def resolve_with_sources(files: Iterable[str], overrides: Iterable[str] = (),
                         suite: str | None = None) -> tuple[dict, dict]:
    """(every resolved key as plain data, {dotted key: source}), the layers in the order the
    jobs see them: profile files, `suite_overrides.<suite>`, the command line."""
    raw, provenance = read_profiles(files)
    cli = parse_overrides(overrides)
    cfg = from_dict(raw, cli)
    typed = _paths(cli)
    if suite:
        overridden = {**(raw.get("suite_overrides") or {}), **(cli.get("suite_overrides") or {})}
        if suite not in overridden:
            known = ", ".join(overridden) or "none"
            raise ConfigError(f"config: no suite_overrides for {suite!r} (overridden suites: {known})")
        for path in _paths((raw.get("suite_overrides") or {}).get(suite) or {}):
            provenance[path] = f"suite_overrides.{suite}"
        typed = [p for p in typed if not p.startswith("suite_overrides.")]
        typed += _paths((cli.get("suite_overrides") or {}).get(suite) or {})
        cfg = cfg.for_suite(suite)
    for path in typed:
        provenance[path] = "command line"
    return cfg.resolved(), provenance


def _paths(block: dict, prefix: str = "") -> list[str]:
    out = []
    for key, value in block.items():
        if isinstance(value, dict) and value:
            out += _paths(value, f"{prefix}{key}.")
        else:
            out.append(f"{prefix}{key}")
    return out


def source_of(path: str, provenance: dict) -> str:
    """The layer that set `path` (or the nearest enclosing key it set), else `default`."""
    parts = path.split(".")
    for end in range(len(parts), 0, -1):
        hit = provenance.get(".".join(parts[:end]))
        if hit:
            return hit
    return "default"


def _render(value: Any, provenance: dict, path: str, indent: int, lines: list[tuple[str, str]]) -> None:
    pad = "  " * indent
    for key, sub in value.items():
        here = f"{path}{key}"
        if isinstance(sub, dict) and sub:
            lines.append((f"{pad}{key}:", ""))
            _render(sub, provenance, here + ".", indent + 1, lines)
        else:
            text = yaml.safe_dump({key: sub}, default_flow_style=True, width=1 << 16).strip()
            lines.append((pad + text[1:-1], source_of(here, provenance)))


def show(files: Iterable[str], overrides: Iterable[str] = (), suite: str | None = None) -> str:
    files, overrides = [str(f) for f in files], list(overrides)
    resolved, provenance = resolve_with_sources(files, overrides, suite)
    lines: list[tuple[str, str]] = []
    _render(resolved, provenance, "", 0, lines)
    width = min(max(len(text) for text, _ in lines) + 2, 72)
    head = [f"# resolved profile from {', '.join(files)}"
            + (f" + {len(overrides)} command-line override(s)" if overrides else "")
            + (f", as the jobs of suite {suite!r} see it" if suite else ""),
            "# source of each value: default (drmas/config/profile.py), profile <file>, "
            "suite_overrides.<suite>, command line"]
    body = [f"{text:<{width}}# {src}" if src else text for text, src in lines]
    return "\n".join(head + body) + "\n"
