"""`drmas config show|schema`: a resolved profile (with where each value comes from), or the
JSON-Schema of the profile's or the benchmark suites' keys."""

from __future__ import annotations

from drmas.cli.arguments import add_command


def cmd_config(args) -> None:
    from drmas.config.show import schema_yaml, show

    if args.action == "schema":
        print(schema_yaml(suite=args.suite_schema), end="")
    else:
        print(show(args.configfile, args.overrides, suite=args.suite), end="")


def add_commands(sub) -> None:
    """config."""
    sp = add_command(sub, "config", cmd_config, "show a resolved profile (with where each value "
                     "comes from) or print the config schema", suite=None)
    sp.add_argument("action", choices=["show", "schema"],
                    help="show: the resolved config; schema: the JSON-Schema of every key")
    sp.add_argument("--configfile", nargs="+", default=["config/default.yaml"], metavar="FILE",
                    help="profile file(s), merged in order (default: config/default.yaml)")
    sp.add_argument("--config", dest="overrides", nargs="*", default=[], metavar="KEY=VALUE",
                    help="overrides as Snakemake's --config takes them (VALUE is YAML)")
    sp.add_argument("--suite", default=None, help="also apply this suite's suite_overrides")
    sp.add_argument("--suite-schema", action="store_true",
                    help="schema: the benchmark-suite schema instead of the profile's")
