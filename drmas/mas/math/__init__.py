"""The math MAS: a Solver and a Verifier (orchestra.py), their prompt sets (prompts.py), warm-
start demonstrations (demos.py) and episode stats (stats.py)."""

from drmas.mas.math import demos, orchestra  # noqa: F401  (registers "math")
