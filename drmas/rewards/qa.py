"""Question-answering rewards in Search-R1's style: exact match on the last `<answer>`.

The answer is the content of the last `<answer>…</answer>` of the response; answer and gold
aliases are compared after Search-R1's (SQuAD's) normalisation: lowercase, drop punctuation,
drop the articles a/an/the, collapse whitespace. A response without an answer tag scores 0.

One deliberate guard beyond upstream: a gold alias that normalises to the empty string
(e.g. "The") is ignored, so an empty answer can never match and `sub_em` (where "" would be a
substring of everything) cannot be gamed.
"""

from __future__ import annotations

import re
import string
from collections import Counter

from drmas.rewards.tags import last_tag

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_answer(s: str) -> str:
    """Lowercase, remove punctuation, remove articles, collapse whitespace (in that order)."""
    s = s.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", s).split())


def extract_answer(response: str) -> str | None:
    """Stripped content of the last `<answer>…</answer>`, or None when there is none."""
    return last_tag(response, "answer")


def _normalized(response: str, golds: list[str] | str) -> tuple[str | None, list[str]]:
    """Normalised answer (None if no tag) and the non-empty normalised gold aliases."""
    answer = extract_answer(response)
    if isinstance(golds, str):
        golds = [golds]
    normal_golds = [g for g in (normalize_answer(str(g)) for g in golds) if g]
    return (None if answer is None else normalize_answer(answer)), normal_golds


def exact_match(response: str, golds: list[str] | str) -> float:
    """1.0 iff the normalised last answer equals a normalised gold alias."""
    answer, normal_golds = _normalized(response, golds)
    return float(answer is not None and answer in normal_golds)


def sub_em(response: str, golds: list[str] | str) -> float:
    """1.0 iff a normalised gold alias is a substring of the normalised last answer."""
    answer, normal_golds = _normalized(response, golds)
    return float(answer is not None and any(g in answer for g in normal_golds))


def f1(response: str, golds: list[str] | str) -> float:
    """Token-level F1 of the normalised last answer, max over gold aliases (0.0 with no tag)."""
    answer, normal_golds = _normalized(response, golds)
    if answer is None:
        return 0.0
    return max((_token_f1(answer.split(), g.split()) for g in normal_golds), default=0.0)


def _token_f1(pred: list[str], gold: list[str]) -> float:
    common = sum((Counter(pred) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(gold)
    return 2 * precision * recall / (precision + recall)
