"""The arithmetic generator's difficulty knobs: each makes problems of the stated structure,
and every answer is recomputed here from the question's text alone (not from `steps`)."""

import re

import pytest

from drmas.data.generators.arithmetic import carries, check_steps, generate
from drmas.data.prepare import check_names, prepare_rows
from drmas.errors import ConfigError
from repo import REPO

HAS = re.compile(r"^(\w+) has (\d+) (\w+)\.$")
BUYS = re.compile(r"^(\w+) buys (\d+) bags with (\d+) (\w+) each\.$")
CHANGE = re.compile(r"^(\w+) (gets|gives away) (\d+)(?: (\w+))?\.$")
ASK = re.compile(r"^How many (\w+) does (\w+) have now\?$")


def read(question: str) -> dict:
    """Solve a question from its words: the asked person's asked items, sentence by sentence.
    Returns the answer, the operations [(a, op, b)], the start amount and the sentences that
    count nothing (distractors)."""
    sentences = re.findall(r"[^.?]+[.?]", question)
    sentences = [s.strip() for s in sentences]
    item, name = ASK.match(sentences[-1]).groups()
    total, start, ops, fakes = None, None, [], 0
    for s in sentences[:-1]:
        if m := HAS.match(s):
            who, n, what = m.groups()
            if (who, what) != (name, item) or total is not None:
                fakes += 1
                continue
            total = start = int(n)
        elif m := BUYS.match(s):
            assert m.group(1) == name and m.group(4) == item and total is None
            total = int(m.group(2)) * int(m.group(3))
        elif m := CHANGE.match(s):
            who, verb, n, what = m.groups()
            assert who == name and what in (None, item), s
            op = "+" if verb == "gets" else "-"
            ops.append((total, op, int(n)))
            total = total + int(n) if op == "+" else total - int(n)
            assert total > 0
        else:
            raise AssertionError(f"unparsed sentence {s!r}")
    return {"answer": total, "ops": ops, "start": start, "fakes": fakes}


def rows_of(source: dict, n: int = 60, seed: int = 0) -> list[dict]:
    return generate({"x": source}, n, 10, seed)


def check_answers(rows):
    for r in rows:
        solved = read(r["question"])
        assert r["answers"] == [str(solved["answer"])] == [str(check_steps(r["steps"]))]
    return [read(r["question"]) for r in rows]


@pytest.mark.parametrize("level,ops", [(1, 3), (2, 5), (3, 4), (2, 1)])
def test_ops_knob_chains_that_many_operations(level, ops):
    for solved in check_answers(rows_of({"level": level, "ops": ops})):
        assert len(solved["ops"]) == ops


def test_start_and_operands_knobs_bound_the_numbers():
    solved = check_answers(rows_of({"level": 2, "start": [50, 90], "operands": [10, 30]}, n=100))
    assert all(50 <= s["start"] <= 90 for s in solved)
    amounts = [b for s in solved for _, _, b in s["ops"]]
    assert all(10 <= b <= 30 for b in amounts) and max(amounts) > 20
    assert {op for s in solved for _, op, _ in s["ops"]} == {"+", "-"}


@pytest.mark.parametrize("carry", [True, False])
def test_carries_knob_forces_or_forbids_carries_and_borrows(carry):
    solved = check_answers(rows_of({"level": 2, "ops": 3, "start": [10, 99], "operands": [2, 19],
                                    "carries": carry}, n=100))
    steps = [s for p in solved for s in p["ops"]]
    assert all(carries(a, op, b) == carry for a, op, b in steps)
    assert {op for _, op, _ in steps} == {"+", "-"}     # both additions and subtractions
    # ... and the check itself: by hand, 17 + 5 carries, 12 - 5 borrows, 12 + 5 and 17 - 5 neither
    assert carries(17, "+", 5) and carries(12, "-", 5)
    assert not carries(12, "+", 5) and not carries(17, "-", 5)
    # level 3: the product is free, the additions/subtractions after it follow the knob
    for p in check_answers(rows_of({"level": 3, "ops": 2, "operands": [1, 9], "carries": carry})):
        assert all(carries(a, op, b) == carry for a, op, b in p["ops"])


@pytest.mark.parametrize("n", [1, 3])
def test_distractors_knob_adds_quantities_that_do_not_count(n):
    rows = rows_of({"level": 2, "distractors": n})
    for r, solved in zip(rows, check_answers(rows)):
        assert solved["fakes"] == n
        assert len(re.findall(r"\d+", r["question"])) == 1 + 2 + n   # start, 2 changes, n others


def test_every_knob_at_once_and_the_gold_is_checked():
    rows = rows_of({"level": 1, "ops": 4, "start": [10, 99], "operands": [6, 19], "carries": True,
                    "distractors": 2}, n=200)
    assert len({r["question"] for r in rows}) == len(rows)
    for r, solved in zip(rows, check_answers(rows)):
        assert len(solved["ops"]) == 4 and solved["fakes"] == 2
    with pytest.raises(AssertionError):
        check_steps([[5, "+", 3, 9]])
    with pytest.raises(AssertionError):
        check_steps([[5, "+", 3, 8], [7, "-", 1, 6]])         # does not start from 8


def test_knobs_that_leave_too_few_problems_are_one_line():
    with pytest.raises(ConfigError, match=r"sources\.x: its options give too few distinct problems"):
        generate({"x": {"level": 1, "start": [3, 3], "operands": [1, 1]}}, 400, 10, seed=0)


def test_revise_demos_marks_a_share_of_the_train_rows_only():
    spec = {"kind": "generated", "generator": "arithmetic", "train_problems": 400, "test_problems": 20,
            "sources": {"a": {"level": 1}, "b": {"level": 2}}}
    plain = prepare_rows(spec, 0)
    marked = prepare_rows({**spec, "revise_demos": 0.25}, 0)
    assert [{k: v for k, v in r.items() if k != "revise"} for r in marked] == plain
    share = sum(r.get("revise", False) for r in marked) / sum(r["split"] == "train" for r in marked)
    assert 0.18 < share < 0.32 and not any("revise" in r for r in plain)
    assert not any(r.get("revise") for r in marked if r["split"] != "train")


def test_heldout_problems_are_new_questions_drawn_after_the_other_splits():
    spec = {"kind": "generated", "generator": "arithmetic", "train_problems": 300, "test_problems": 20,
            "sources": {"a": {"level": 2, "ops": 3}, "b": {"level": 3}}}
    plain = prepare_rows(spec, 0)
    more = prepare_rows({**spec, "heldout_problems": 150}, 0)
    held = [r for r in more if r["split"] == "heldout"]
    assert [r for r in more if r["split"] != "heldout"] == plain
    assert {s: sum(r["data_source"] == s for r in held) for s in "ab"} == {"a": 150, "b": 150}
    questions = [r["question"] for r in more]
    assert len(set(questions)) == len(questions)                 # no question in two splits
    for solved, row in zip(check_answers(held), held):
        assert len(solved["ops"]) == (3 if row["data_source"] == "a" else 1)


BAD = [
    ({"sources": {"addsub-1": {"level": 1, "opps": 2}}},
     r"datasets\.basic\.sources\.addsub-1: unknown option\(s\) opps; known: level, ops, start, operands, carries, distractors$"),
    ({"difficulty": 3}, r"datasets\.basic: unknown option\(s\) difficulty for the arithmetic generator; known: .*revise_demos$"),
    ({"sources": {"addsub-1": {"level": 1, "operands": [5, 2]}}}, r"addsub-1\.operands: must be \[low, high\]"),
    ({"sources": {"addsub-1": {"level": 1, "carries": "yes"}}}, r"addsub-1\.carries: must be true or false"),
    ({"sources": {"addsub-1": {"level": 1, "ops": 9}}}, r"addsub-1\.ops: must be an integer from 1 to 8"),
    ({"sources": {"addsub-1": {"level": 4}}}, r"addsub-1\.level: arithmetic level must be one of"),
    ({"revise_demos": 2}, r"datasets\.basic\.revise_demos: must be a number from 0 to 1"),
    ({"heldout_problems": -1}, r"datasets\.basic\.heldout_problems: must be an integer >= 0"),
    ({"sources": {}}, r"datasets\.basic\.sources: must be a non-empty mapping of data_source -> options$"),
    ({"sources": {"addsub-1": 1}}, r"datasets\.basic\.sources\.addsub-1: must be a mapping of options \(level: 1, \.\.\.\), got 1$"),
]


@pytest.mark.parametrize("change,message", BAD)
def test_unknown_or_bad_options_are_refused_in_one_line_when_the_file_loads(change, message):
    import yaml

    """`check_names` is what `load_suite` runs on every datasets entry of a benchmark file."""
    spec = dict(yaml.safe_load((REPO / "benchmarks" / "math.yaml").read_text())["datasets"]["basic"])
    spec.update(change)
    where = "benchmarks/math.yaml: datasets.basic"
    with pytest.raises(ConfigError, match=rf"^benchmarks/math.yaml: (datasets\.basic\.sources\.)?{message}") as err:
        check_names(spec, where)
    assert "\n" not in str(err.value)


def test_the_commented_example_in_math_yaml_loads_and_generates():
    text = (REPO / "benchmarks" / "math.yaml").read_text()
    example = next(l for l in text.splitlines() if l.strip().startswith("# addsub-hard:"))
    text = text.replace(example, example.replace("# ", "", 1)).replace("    # revise_demos:", "    revise_demos:")
    import yaml

    spec = yaml.safe_load(text)["datasets"]["basic"]
    check_names(spec, "math.yaml: datasets.basic")
    assert spec["revise_demos"] == 0.2 and spec["sources"]["addsub-hard"]["carries"] is True
    rows = generate({"addsub-hard": spec["sources"]["addsub-hard"]}, 50, 10, seed=0)
    for solved in check_answers(rows):
        assert len(solved["ops"]) == 4 and solved["fakes"] == 2
