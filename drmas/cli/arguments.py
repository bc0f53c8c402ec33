"""Parser pieces every command family shares: the parser whose usage errors are one line,
integer argument types with bounds (`positive`, `int_at_least`), and `add_command`, which
adds a subcommand with the common `--config` / `--suite` / search options."""

from __future__ import annotations

import argparse


class OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line and exit 2, like every other user error."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def int_at_least(low: int, high: int | None = None):
    """An argument type: an integer >= `low` (and <= `high` when given)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < low or (high is not None and value > high):
            bound = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise argparse.ArgumentTypeError(f"must be {bound}, got {value}")
        return value
    parse.__name__ = "integer"
    return parse


positive = int_at_least(1)


def number_between(low: float, high: float):
    """An argument type: a finite number with `low` <= value <= `high` (seconds, a rate)."""
    import math

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(value) or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low:g} and {high:g}, got {text}")
        return value
    parse.__name__ = "number"
    return parse


def output_folder(text: str) -> str:
    """An argument type: a folder to write into; not empty (`--out ""` would be the current
    folder) and not only spaces."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path (give the folder to write)")
    return text


def output_prefix(text: str) -> str:
    """An argument type: the path of outputs named `<path><ending>` (`x/math` -> `x/math.md`,
    `x/math_stability.csv`): not empty, not a folder (`sub/`, `.`, `..`)."""
    import os

    output_folder(text)
    if text.endswith(("/", os.sep)) or os.path.basename(text) in (".", ".."):
        raise argparse.ArgumentTypeError(f"{text!r} names a folder; give a path without "
                                         "extension inside it (e.g. tables/math)")
    return text


def config_key(section: str, key: str):
    """An argument type for a flag that overrides the profile key `<section>.<key>` (e.g.
    `--spike-k` for `report.spike_k`): the value is read and checked against that key's own
    schema (its type and bounds, from drmas/config/profile.py), so a flag can hold no value
    the key could not."""
    def parse(text: str):
        from drmas.config.profile import config_schema
        from drmas.config.schema import coerce, validate
        from drmas.errors import ConfigError

        schema = config_schema()["properties"][section]["properties"][key]
        schema = {k: v for k, v in schema.items() if k not in ("default", "description")}
        value = coerce(text, schema)
        try:
            validate(value, schema, what=f"{section}.{key}")
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc).replace(": (top level)", "", 1)) from None
        return value
    parse.__name__ = f"{section}.{key}"
    return parse


def add_command(sub, name, fn, help_, suite=True, search=False) -> argparse.ArgumentParser:
    """Add subcommand `name` running `fn(args)` (none: its own subcommands set it).

    suite=None: no common options; False: `--config`; True: `--config` and `--suite`.
    search: also `--threads`, `--index` and `--retriever-url` (commands that run agents).
    """
    sp = sub.add_parser(name, help=help_, description=help_)
    if fn is not None:
        sp.set_defaults(fn=fn)
    if suite is not None:
        sp.add_argument("--config", required=True, help="profile config YAML")
    if suite:
        sp.add_argument("--suite", required=True, help="benchmark YAML (benchmarks/<name>.yaml)")
    if search:
        sp.add_argument("--threads", type=positive, default=None,
                        help="CPU threads for this job (default: the config's `threads`)")
        sp.add_argument("--index", default=None, help="search index folder, BM25 or dense (searching suites)")
        sp.add_argument("--retriever-url", default=None,
                        help="retrieval service URL instead of an in-process index")
    return sp
