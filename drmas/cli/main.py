"""The `drmas` command line: one subcommand per workflow stage (the Snakemake rules call these).

Every command takes `--config` (a profile YAML) and, where it acts on a suite, `--suite`
(a benchmarks/*.yaml file). User errors print one line and exit 2, never a traceback; input
files are checked before any model is built. So do the environment's: a full disk, a
read-only or missing folder, a permission (`errors.environment_line`: the path and the
cause); and since every output is written atomically (`drmas.data.io.atomic_path`), such a
failure leaves no partial output under its final name. An unexpected error prints one line
too, its traceback kept in a log file (`errors.log_unexpected`), and exits 1.

This module is the entry point; each family of subcommands lives in its own module:
workflow (prepare, tokenizer, warmstart, train, evaluate), report (table, plot), card
(card, verify), perf,
models (convert-gguf), check, config, watch, retrieval (index, serve).
"""

from __future__ import annotations

import argparse
import sys

from drmas.cli import card, check, config, models, perf, report, retrieval, watch, workflow
from drmas.cli.arguments import OneLineParser
from drmas.cli.job import pin_cpu_kernels
from drmas.errors import DrmasError, environment_line, log_unexpected

FAMILIES = (workflow, report, card, perf, models, check, config, watch, retrieval)  # `--help` order


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="drmas", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    for family in FAMILIES:
        family.add_commands(sub)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        pin_cpu_kernels(args)           # before any torch kernel runs
        code = args.fn(args)        # None, or an exit status (`drmas verify`: 3)
    except DrmasError as exc:
        print(f"drmas {args.command}: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"drmas {args.command}: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        line = environment_line(exc, getattr(args, "out", None))
        if line is None:            # not the file system's (a socket, a library's OSError)
            return _unexpected(args, exc)
        print(f"drmas {args.command}: error: {line}", file=sys.stderr)
        return 2
    except Exception as exc:        # a bug, not a user error: one line here, the rest in a log
        return _unexpected(args, exc)
    return code if isinstance(code, int) else 0


def _unexpected(args, exc: Exception) -> int:
    line = log_unexpected(args.command, exc, getattr(args, "out", None))
    print(f"drmas {args.command}: {line}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
