"""One look for every table and figure: labels, fixed colours keyed by name, titles.

Colours are looked up by agent or method *name*, never by position in a plot, so the
Verifier has the same colour in every figure of every suite, and GRPO and Dr. MAS too.
Names outside the fixed maps get a colour from a stable hash of the name (the same name
always gets the same colour, in any run).
"""

from __future__ import annotations

import zlib

from drmas.registry import ESTIMATORS

METHOD_ORDER = {"base": 0, "grpo": 1, "grpo_2025": 1, "mean_agent_std_global": 2,
                "mean_global_std_agent": 3, "drmas": 4}
METHOD_LABEL = {"base": "Base (before RL)", **{n: e.label for n, e in ESTIMATORS.entries().items()}}
DELTA_LABEL = "Δ Dr. MAS − GRPO"
#: the paired Δ rows of the main table: Dr. MAS against each GRPO the profile runs
DELTA_LABELS = {"grpo": DELTA_LABEL, "grpo_2025": "Δ Dr. MAS − GRPO (upstream 2025)"}

# Okabe-Ito colours (readable with colour-vision deficiencies): methods and agents take
# different ones, so an agent line is never mistaken for a method line.
METHOD_COLORS = {"GRPO": "#D55E00", "Dr. MAS": "#0072B2", "Base (before RL)": "#7F7F7F",
                 "Abl. agent mean / global std": "#E69F00",
                 "Abl. global mean / agent std": "#56B4E9"}
AGENT_COLORS = {"solver": "#009E73", "verifier": "#CC79A7", "searcher": "#E69F00",
                "answerer": "#56B4E9", "critic": "#8C564B", "refiner": "#17BECF"}
_SPARE = ["#8C564B", "#17BECF", "#BCBD22", "#9467BD", "#E377C2", "#7F7F7F"]
ASSIGNMENT_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]


def use_config(cfg) -> None:
    """Take the profile's named methods (`method_defs`: the ablations) into the labels and
    the row order: the profile's `methods` order, after the base rows."""
    METHOD_LABEL.update({m: cfg.label_of(m) for m in cfg.methods})
    METHOD_ORDER.update({m: i + 1 for i, m in enumerate(cfg.methods)})


def row_order(cells, assignments) -> list:
    """The (assignment, method) keys of `cells` in table order: the assignments in the order
    given (unknown ones last), then the paper's order of methods, then by name."""
    assignments = list(assignments)
    return sorted(cells, key=lambda key: (
        assignments.index(key[0]) if key[0] in assignments else len(assignments),
        METHOD_ORDER.get(key[1], 9), key))


def _hashed(name: str, colours: list[str]) -> str:
    return colours[zlib.crc32(name.encode()) % len(colours)]


def agent_color(agent: str) -> str:
    return AGENT_COLORS.get(agent) or _hashed(agent, _SPARE)


def method_color(method: str) -> str:
    """Colour of a method by name or label ('drmas' and 'Dr. MAS' agree)."""
    label = METHOD_LABEL.get(method, method)
    return METHOD_COLORS.get(label) or _hashed(label, _SPARE)


def agent_palette(agents) -> dict[str, str]:
    return {a: agent_color(a) for a in agents}


def method_palette(methods) -> dict[str, str]:
    return {m: method_color(m) for m in methods}


def title(suite, profile: str, what: str) -> str:
    """'Math reasoning (Solver + Verifier) [math], profile default: <what>'."""
    name = suite.title or suite.name
    tag = f" [{suite.name}]" if suite.title and suite.title != suite.name else ""
    return f"{name}{tag}, profile {profile}: {what}"
