"""Seeded generator of arithmetic word problems with integer answers (default profile).

Each problem form (`level`) is its own `data_source`, so tables get several benchmark
columns as in the paper. Rows follow the prepared-row contract (`id, data_source, question,
answers, split`) plus `steps`: the worked solution as `[a, op, b, result]` lists, which the
warm-start trace generator turns into Solver and Verifier demonstrations.

The level numbers name forms, not a difficulty ranking, and the benchmark names the sources
after their form (`addsub-1`, `addsub-2`, `mul-addsub`). Measured once (one machine, one
warm start; default profile, shared base, seed 0, avg@16 over 40 test problems, 95%
bootstrap interval over problems): addsub-1 67.7 [57.7, 77.5], addsub-2 76.9 [70.2, 82.0],
mul-addsub 92.2 [90.2, 94.2]. The tiny model learns arithmetic as a table of seen facts and
copies operands by position: level 3 has ~150 distinct computations, every test one seen
in training about 9 times, and its second step works on the model's own product; level 1
fails almost only where the start amount is 5 or less, the size of a change (1-5), and the
model then writes the start amount twice ("3 - 3 = 2" for "has 3, gives away 2"): 35%
solved there, 84% elsewhere.
"""

from __future__ import annotations

import random

from drmas.registry import GENERATORS

NAMES = ["Ann", "Ben", "Cara", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jo", "Kai", "Lea"]
ITEMS = ["apples", "books", "coins", "pens", "shells", "stamps", "cards", "beads", "eggs", "nuts"]

LEVELS = (1, 2, 3)


def _apply(a: int, op: str, b: int) -> int:
    return a + b if op == "+" else a - b if op == "-" else a * b


def _add_or_sub(rng: random.Random, total: int) -> tuple[str, int]:
    """An addition, or a subtraction that keeps the running total positive."""
    if total > 2 and rng.random() < 0.5:
        return "-", rng.randint(1, min(5, total - 1))
    return "+", rng.randint(1, 5)


def make_problem(rng: random.Random, level: int) -> tuple[str, list[list]]:
    """Return (question, steps) for one problem of the given form (`level`).

    level 1: one addition or subtraction of a digit; level 2: two of them; level 3: a small
    product then an addition or subtraction (not harder for a tiny model: see above).
    Numbers stay small so that a tiny model can learn the arithmetic in a short warm start.
    """
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    steps: list[list] = []
    if level == 3:
        boxes, per_box = rng.randint(2, 4), rng.randint(2, 6)
        total = boxes * per_box
        steps.append([boxes, "*", per_box, total])
        text = f"{name} buys {boxes} bags with {per_box} {item} each."
        n_more = 1
    else:
        total = rng.randint(2, 20)
        text = f"{name} has {total} {item}."
        n_more = level
    for _ in range(n_more):
        op, b = _add_or_sub(rng, total)
        new = _apply(total, op, b)
        steps.append([total, op, b, new])
        verb = "gets" if op == "+" else "gives away"
        text += f" {name} {verb} {b}."
        total = new
    return f"{text} How many {item} does {name} have now?", steps


def generate(sources: dict[str, dict], train_problems: int, test_problems: int, seed: int) -> list[dict]:
    """Train rows spread evenly over the sources, plus `test_problems` test rows per source.

    Test questions never appear in the train split (deduplicated by question text).
    """
    rng = random.Random(seed)
    rows: list[dict] = []
    seen: set[str] = set()
    names = list(sources)
    for split, per_source in (("test", test_problems), ("train", -(-train_problems // len(names)))):
        for source in names:
            level = int(sources[source]["level"])
            if level not in LEVELS:
                raise ValueError(f"arithmetic level must be one of {LEVELS}, got {level}")
            made = 0
            while made < per_source:
                question, steps = make_problem(rng, level)
                if question in seen:
                    continue
                seen.add(question)
                rows.append({"id": f"{source}-{split}-{made}", "data_source": source,
                             "question": question, "answers": [str(steps[-1][3])],
                             "split": split, "steps": steps})
                made += 1
    return rows


@GENERATORS.register("arithmetic")
def _arithmetic(spec: dict, seed: int) -> list[dict]:
    return generate(spec["sources"], int(spec["train_problems"]), int(spec["test_problems"]), seed)
