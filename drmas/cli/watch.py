"""`drmas watch`: a live table of a workflow's running jobs (step, ETA)."""

from __future__ import annotations

from drmas.cli.arguments import add_command, number_between


def cmd_watch(args) -> None:
    from drmas.status.watch import watch

    watch(args.results, interval=args.interval, once=args.once)


def add_commands(sub) -> None:
    """watch."""
    sp = add_command(sub, "watch", cmd_watch, "live table of a workflow's running jobs (step, ETA)",
                     suite=None)
    sp.add_argument("results", nargs="?", default="results/default",
                    help="the profile's results folder (default: results/default)")
    sp.add_argument("--interval", type=number_between(0.1, 3600), default=2.0,
                    help="seconds between refreshes (0.1 to 3600)")
    sp.add_argument("--once", action="store_true", help="print the table once and exit")
