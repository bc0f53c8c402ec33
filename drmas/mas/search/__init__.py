"""The search MAS: a Verifier routing to a Searcher or an Answerer (orchestra.py), the
shared history (history.py), prompt sets (prompts.py), warm-start demonstrations (demos.py)
and episode stats (stats.py)."""

from drmas.mas.search import demos, orchestra  # noqa: F401  (registers "search")
