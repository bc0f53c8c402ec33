"""The `single` math MAS: the Solver alone (orchestra.py), for single-agent workloads."""

from drmas.mas.single import orchestra  # noqa: F401  (registers "single")
