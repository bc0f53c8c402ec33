"""The four-agent math MAS (the paper's agent-count ablation): Solver -> Critic -> Refiner ->
Verifier, looped (orchestra.py); the Critic and Refiner roles (critic.py, refiner.py), the
Solver and Verifier of the two-agent math MAS, prompt sets (prompts.py), warm-start
demonstrations (demos.py) and episode stats (stats.py)."""

from drmas.mas.math4 import demos, orchestra  # noqa: F401  (registers "math4")
