"""Reward and agent parsing take time linear in the response: 1 MB of hostile text (unclosed
tags, runs of digits or spaces that used to make a regex backtrack over every split) is
scored within a generous 2 s, and every result equals what the old regexes gave."""

import json
import random
import re
import subprocess
import sys

import pytest

from drmas.rewards.tags import last_tag
from drmas.rewards import math as math_reward
from drmas.rewards.qa import exact_match, extract_answer, f1, sub_em  # noqa: F401 (used by the timed snippets)
from drmas.rewards.tags import tag_spans

MB = 1 << 20
BOUND_S = 2.0

# (name, python expression of the call): each runs on 1 MB in a child process, so a
# regression to O(n^2) fails at the child's timeout instead of hanging the suite.
HOSTILE = {
    "qa exact_match, unclosed <answer> x 128k": 'exact_match("<answer>" * (MB // 8), ["x"])',
    "qa exact_match, one unclosed <answer>": 'exact_match("<answer>" + "a" * MB, ["a"])',
    "qa sub_em, many closers no opener": 'sub_em("</answer>" * (MB // 9), ["x"])',
    "qa f1, 1 MB answer": 'f1("<answer>" + "the a " * (MB // 6) + "</answer>", ["x"])',
    "last_tag, unclosed <verify> x 128k": 'last_tag("<verify>" * (MB // 8), "verify")',
    "last_tag, unclosed <search> x 128k": 'last_tag("<search>" * (MB // 8), "search")',
    "math, unclosed \\\\boxed{ x 150k": 'math_score("\\\\boxed{" * (MB // 7), "1")',
    "math, 1 MB of digits then x": 'math_score("\\\\boxed{" + "1" * MB + "x}", "1")',
    "math, digits . digits x": 'math_score("\\\\boxed{" + "1" * MB + "." + "1" * MB + "x}", "1")',
    "math, ^ then 1 MB spaces": 'math_score("\\\\boxed{^" + " " * MB + "x}", "1")',
    "math, thousands x 250k": 'math_score("\\\\boxed{1" + ",000" * (MB // 4) + "x}", "1")',
    "math, \\\\left x 200k": 'math_score("\\\\boxed{" + "\\\\left" * (MB // 5) + "}", "1")',
}

CHILD = """
import json, sys, time
from drmas.rewards.tags import last_tag
from drmas.rewards.math import score as math_score
from drmas.rewards.qa import exact_match, f1, sub_em
MB = 1 << 20
out = {}
for name, expr in json.loads(sys.argv[1]).items():
    t0 = time.perf_counter()
    value = eval(expr)
    out[name] = [time.perf_counter() - t0, value]
print(json.dumps(out))
"""


def test_one_megabyte_hostile_responses_are_scored_fast():
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(HOSTILE)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads(proc.stdout)
    slow = {name: round(t, 2) for name, (t, _) in results.items() if t >= BOUND_S}
    assert not slow, slow
    values = {name: v for name, (_, v) in results.items()}
    assert values["qa exact_match, unclosed <answer> x 128k"] == 0.0
    assert values["qa exact_match, one unclosed <answer>"] == 0.0
    assert values["qa sub_em, many closers no opener"] == 0.0
    assert values["qa f1, 1 MB answer"] == 0.0
    assert values["last_tag, unclosed <verify> x 128k"] is None
    assert all(v == 0.0 for k, v in values.items() if k.startswith("math"))


def _old_last_tag(text: str, tag: str):
    """The regex every parser used before (the reference for the linear scan)."""
    found = re.findall(rf"<{tag}>(.*?)</{tag}>", text, flags=re.DOTALL)
    return found[-1].strip() if found else None


@pytest.mark.parametrize("text, expected", [
    ("<answer>a</answer><answer> b </answer>", "b"),
    ("<answer>a</answer></answer>", "a"),                        # a stray closer
    ("<answer><answer>x</answer>", "<answer>x"),                 # nested opener: first wins
    ("<answer>a</answer><answer>unclosed", "a"),                 # an unclosed last one
    ("<answer>\n multi\nline </answer>", "multi\nline"),
    ("<answer></answer>", ""),
    ("</answer><answer>", None),
    ("<Answer>x</Answer>", None),                                # case matters, as before
    ("no tag", None),
    ("", None),
])
def test_hand_made_cases(text, expected):
    assert last_tag(text, "answer") == expected == _old_last_tag(text, "answer")
    assert extract_answer(text) == expected


def test_random_texts_match_the_old_regex():
    rng = random.Random(0)
    pieces = ["<answer>", "</answer>", "<search>", "</search>", "a", " ", "\n", "<", ">", "/"]
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        for tag in ("answer", "search"):
            assert last_tag(text, tag) == _old_last_tag(text, tag), text
            assert [text[a:b] for a, b in tag_spans(text, tag)] == re.findall(
                rf"<{tag}>(.*?)</{tag}>", text, flags=re.DOTALL), text


OLD_DEGREE = re.compile(r"\^\s*\{?\s*\\circ\s*\}?")
OLD_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)")


def test_rewritten_math_patterns_match_like_the_old_ones():
    """The two patterns rewritten to parse one way: same matches on random short texts."""
    new_degree = math_reward._SUBS[3][0]
    rng = random.Random(1)
    for _ in range(5000):
        text = "".join(rng.choice(["^", " ", "{", "}", "\\circ", "1", "x", "."])
                       for _ in range(rng.randint(0, 10)))
        assert [m.span() for m in new_degree.finditer(text)
                if m.group(0).startswith("^")] == [m.span() for m in OLD_DEGREE.finditer(text)], text
        digits = "".join(rng.choice("12.+-x") for _ in range(rng.randint(0, 8)))
        assert bool(math_reward._NUMBER.fullmatch(digits)) == bool(OLD_NUMBER.fullmatch(digits)), digits


def test_normal_answers_score_as_before():
    assert math_reward.score("so \\boxed{1,000} it is", "1000") == 1.0
    assert math_reward.score("\\boxed{90^{\\circ}}", "90") == 1.0
    assert math_reward.score("\\boxed{90 ^ \\circ}", "90") == 1.0
    assert math_reward.score("\\boxed{2.5}", "2.50") == 1.0
    assert math_reward.score("\\boxed{12}", "13") == 0.0
    assert exact_match("<answer>x</answer> then <answer>The Eiffel Tower.</answer>",
                       ["eiffel tower"]) == 1.0


def test_long_answers_are_not_cached():
    """A megabyte answer is normalised but not kept in the spelling cache."""
    assert not math_reward.is_equiv("8", "7")              # caches the gold's spelling
    before = math_reward._cached_spelling.cache_info().currsize
    assert not math_reward.is_equiv("7" * MB, "7")
    assert math_reward._cached_spelling.cache_info().currsize == before
