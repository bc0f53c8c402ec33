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

Difficulty knobs: options of a source beside `level` (benchmarks/math.yaml shows them). Left
out, a source makes exactly the problems it made before the knobs existed (same random draws;
tests/data/test_arithmetic_knobs.py holds the hashes of the benchmark files' datasets).
- `ops` (default: the level's, 1 or 2; 1 after level 3's product): how many additions or
  subtractions follow the start amount (or the product), 1-8;
- `start` (default [2, 20]): the range of the start amount (levels 1 and 2);
- `operands` (default [1, 5]): the range of each amount added or taken away;
- `carries` (default: not constrained): true makes every addition carry and every
  subtraction borrow in the ones digit, false makes none of them do (level 3's product is
  not constrained);
- `distractors` (default 0): that many sentences with quantities that do not count (another
  person's items, or the person's items of another kind); the steps then name their item
  ("Ann gets 3 apples.") so that every sentence says whose items and which ones it counts.
An entry-level option `revise_demos` (default 0) marks that share of the train rows with
`"revise": true`: their warm-start demonstration (drmas/mas/math/demos.py) is a Solver draft
with a slip, the Verifier's rejection and the Solver's corrected answer. The entry-level
`heldout_problems` (default 0) draws that many more problems per source after the train rows
(split `heldout`, in neither train nor test; the other splits unchanged): `drmas evaluate
--split heldout` measures a base model on them within a point or two. Every problem's gold
answer is recomputed from its steps (`check_steps`) before it is kept.
"""

from __future__ import annotations

import random

from drmas.registry import GENERATORS

NAMES = ["Ann", "Ben", "Cara", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jo", "Kai", "Lea"]
ITEMS = ["apples", "books", "coins", "pens", "shells", "stamps", "cards", "beads", "eggs", "nuts"]

LEVELS = (1, 2, 3)
SOURCE_OPTIONS = ("level", "ops", "start", "operands", "carries", "distractors")
ENTRY_OPTIONS = ("kind", "generator", "train_problems", "test_problems", "heldout_problems",
                 "sources", "revise_demos")
MAX_OPS = 8
MAX_TRIES = 20000             # draws in a row that give no new problem before giving up


def _apply(a: int, op: str, b: int) -> int:
    return a + b if op == "+" else a - b if op == "-" else a * b


def carries(a: int, op: str, b: int) -> bool:
    """Whether `a op b` carries (addition) or borrows (subtraction) in the ones digit."""
    return a % 10 + b % 10 >= 10 if op == "+" else a % 10 < b % 10


def _add_or_sub(rng: random.Random, total: int, operands: tuple[int, int] = (1, 5),
                carry: bool | None = None) -> tuple[str, int] | None:
    """An addition, or a subtraction that keeps the running total positive; with `carry`
    set, one whose carry (borrow) is `carry`, drawn among all that fit (None: none fits)."""
    lo, hi = operands
    if carry is not None:
        fits = [(op, b) for op in "+-" for b in range(lo, hi + 1)
                if (op == "+" or b < total) and carries(total, op, b) == carry]
        return rng.choice(fits) if fits else None
    if total > max(2, lo) and rng.random() < 0.5:
        return "-", rng.randint(lo, min(hi, total - 1))
    return "+", rng.randint(lo, hi)


def check_steps(steps: list[list]) -> int:
    """The gold answer, recomputed: each step's result is its operation's, each step starts
    from the previous result, every amount stays positive. An AssertionError otherwise."""
    for i, (a, op, b, result) in enumerate(steps):
        assert result == _apply(a, op, b) and result > 0, steps
        assert i == 0 or a == steps[i - 1][3], steps
    return steps[-1][3]


def make_problem(rng: random.Random, level: int, ops: int | None = None,
                 start: tuple[int, int] = (2, 20), operands: tuple[int, int] = (1, 5),
                 carry: bool | None = None, distractors: int = 0) -> tuple[str, list[list]] | None:
    """Return (question, steps) for one problem of the given form (`level`), or None when
    the knobs leave no operation that fits (a `carry` constraint; the caller draws again).

    level 1: one addition or subtraction of a digit; level 2: two of them; level 3: a small
    product then an addition or subtraction (not harder for a tiny model: see above).
    Numbers stay small so that a tiny model can learn the arithmetic in a short warm start.
    The other arguments are the difficulty knobs (module docstring); their defaults draw
    exactly what the function drew before they existed.
    """
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    steps: list[list] = []
    if level == 3:
        boxes, per_box = rng.randint(2, 4), rng.randint(2, 6)
        total = boxes * per_box
        steps.append([boxes, "*", per_box, total])
        sentences = [f"{name} buys {boxes} bags with {per_box} {item} each."]
        n_more = 1
    else:
        total = rng.randint(*start)
        sentences = [f"{name} has {total} {item}."]
        n_more = level
    for _ in range(n_more if ops is None else ops):
        drawn = _add_or_sub(rng, total, operands, carry)
        if drawn is None:
            return None
        op, b = drawn
        new = _apply(total, op, b)
        steps.append([total, op, b, new])
        verb = "gets" if op == "+" else "gives away"
        sentences.append(f"{name} {verb} {b} {item}." if distractors else f"{name} {verb} {b}.")
        total = new
    for _ in range(distractors):    # quantities that do not count, anywhere after the first
        other = rng.choice([n for n in NAMES if n != name])
        if rng.random() < 0.5:
            fake = f"{other} has {rng.randint(*start)} {item}."
        else:
            fake = f"{name} has {rng.randint(*start)} {rng.choice([i for i in ITEMS if i != item])}."
        sentences.insert(rng.randint(1, len(sentences)), fake)
    text = " ".join(sentences)
    return f"{text} How many {item} does {name} have now?", steps


def _span(value, key: str, where: str, floor: int) -> tuple[int, int]:
    from drmas.errors import ConfigError

    if (not isinstance(value, list) or len(value) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
            or not floor <= value[0] <= value[1] <= 999):
        raise ConfigError(f"{where}.{key}: must be [low, high], integers with "
                          f"{floor} <= low <= high <= 999, got {value!r}")
    return value[0], value[1]


def source_knobs(conf, where: str) -> dict:
    """A source's options checked (one ConfigError line naming the key) -> make_problem's
    keyword arguments (only the knobs given)."""
    from drmas.data.generators.options import checked_source
    from drmas.errors import ConfigError

    conf = checked_source(conf, where, SOURCE_OPTIONS, "level: 1, ...")
    level = conf.get("level")
    if isinstance(level, bool) or level not in LEVELS:
        raise ConfigError(f"{where}.level: arithmetic level must be one of {LEVELS}, got {level!r}")
    knobs: dict = {}
    if "ops" in conf:
        ops = conf["ops"]
        if isinstance(ops, bool) or not isinstance(ops, int) or not 1 <= ops <= MAX_OPS:
            raise ConfigError(f"{where}.ops: must be an integer from 1 to {MAX_OPS}, got {ops!r}")
        knobs["ops"] = ops
    if "start" in conf:
        knobs["start"] = _span(conf["start"], "start", where, 1)
    if "operands" in conf:
        knobs["operands"] = _span(conf["operands"], "operands", where, 1)
    if "carries" in conf:
        if not isinstance(conf["carries"], bool):
            raise ConfigError(f"{where}.carries: must be true or false, got {conf['carries']!r}")
        knobs["carry"] = conf["carries"]
    if "distractors" in conf:
        d = conf["distractors"]
        if isinstance(d, bool) or not isinstance(d, int) or not 0 <= d <= 5:
            raise ConfigError(f"{where}.distractors: must be an integer from 0 to 5, got {d!r}")
        knobs["distractors"] = d
    return knobs


def revise_share(spec: dict, where: str) -> float:
    """The entry's `revise_demos` share (0 when absent), checked."""
    from drmas.data.generators.options import checked_share

    return checked_share(spec, "revise_demos", where)


def mark_demo_rows(rows: list[dict], share: float, seed: int, flag: str = "revise") -> None:
    """Mark a `share` of the train rows `"<flag>": true` (their own random stream per flag:
    the rows themselves do not change; nothing is marked, no field added, when `share` is 0)."""
    if share <= 0:
        return
    rng = random.Random(f"{flag}-demos-{seed}")
    for row in rows:
        if row["split"] == "train" and rng.random() < share:
            row[flag] = True


def check_spec(spec: dict, where: str = "datasets") -> None:
    """The entry's and its sources' options (called when a benchmark file is loaded and
    before generating): an unknown or bad one is one ConfigError line naming its key."""
    from drmas.data.generators.options import checked_sources
    from drmas.errors import ConfigError

    for name, conf in checked_sources(spec, where, "arithmetic", ENTRY_OPTIONS).items():
        source_knobs(conf, f"{where}.sources.{name}")
    revise_share(spec, where)
    heldout = spec.get("heldout_problems", 0)
    if isinstance(heldout, bool) or not isinstance(heldout, int) or heldout < 0:
        raise ConfigError(f"{where}.heldout_problems: must be an integer >= 0, got {heldout!r}")


def generate(sources: dict[str, dict], train_problems: int, test_problems: int, seed: int,
             revise_demos: float = 0.0, heldout_problems: int = 0) -> list[dict]:
    """Train rows spread evenly over the sources, plus `test_problems` test rows per source,
    then `heldout_problems` held-out rows per source (drawn last: the others unchanged).

    No question appears in two splits (deduplicated by question text). A source's knobs
    that leave fewer distinct problems than it needs are a ConfigError.
    """
    from drmas.errors import ConfigError

    rng = random.Random(seed)
    rows: list[dict] = []
    seen: set[str] = set()
    names = list(sources)
    for split, per_source in (("test", test_problems), ("train", -(-train_problems // len(names))),
                              ("heldout", heldout_problems)):
        for source in names:
            knobs = source_knobs(sources[source], f"sources.{source}")
            level = sources[source]["level"]
            made = tries = 0
            while made < per_source:
                problem = make_problem(rng, level, **knobs)
                tries += 1
                if problem is None or problem[0] in seen:
                    if tries >= MAX_TRIES:
                        raise ConfigError(f"arithmetic: sources.{source}: its options give too "
                                          f"few distinct problems ({made} new of {per_source} "
                                          f"{split} problems in {MAX_TRIES} draws); widen them")
                    continue
                question, steps = problem
                tries = 0
                seen.add(question)
                rows.append({"id": f"{source}-{split}-{made}", "data_source": source,
                             "question": question, "answers": [str(check_steps(steps))],
                             "split": split, "steps": steps})
                made += 1
    mark_demo_rows(rows, revise_demos, seed)
    return rows


@GENERATORS.register("arithmetic")
def _arithmetic(spec: dict, seed: int) -> list[dict]:
    check_spec(spec)
    return generate(spec["sources"], int(spec["train_problems"]), int(spec["test_problems"]), seed,
                    revise_demos=revise_share(spec, "datasets"),
                    heldout_problems=int(spec.get("heldout_problems", 0)))


_arithmetic.check = check_spec      # run by drmas.data.prepare.check_names when a file loads
