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
