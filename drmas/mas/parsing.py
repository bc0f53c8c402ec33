"""How agent outputs are read: the extraction rules of the paper's code, shared by every
prompt set (ARCHITECTURE.md, "Agents, prompt sets and parsing").

Upstream reads a tagged action from the *first* opening tag and the *first* closing tag
(`str.find`), strips the content, and passes on either the tag alone (a search query, an
answer) or the whole output with that tag's content tidied (a verdict, which the team then
reads in full). A verdict is decided by a fixed priority, not by position: the output is
searched for the first choice's exact tag, then the second's; with neither, the first
choice holds (a missing verdict approves / says "yes").

Whether an output is *valid* (the row penalty) is the tag's presence plus what the prompt
set asks for (`drmas/mas/prompting.py`: one `<think>…</think>` pair, no CJK characters).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CJK = re.compile(r"[\u4e00-\u9fff]")


@dataclass(frozen=True)
class TagSpan:
    """The first `<tag>` and the first `</tag>` of a text, and the stripped text between."""

    content: str
    start: int                     # index of the first "<tag>"
    end: int                       # index of the first "</tag>"
    open_len: int


def first_tag(text: str, tag: str) -> TagSpan | None:
    """The first opening and first closing `tag`, or None when either is missing. (A closing
    tag before the opening one gives empty content, as upstream's slicing does.)"""
    opening, closing = f"<{tag}>", f"</{tag}>"
    start, end = text.find(opening), text.find(closing)
    if start < 0 or end < 0:
        return None
    return TagSpan(text[start + len(opening):end].strip(), start, end, len(opening))


def tag_only(text: str, tag: str) -> str:
    """`<tag>content</tag>` of the first tag, "" without one: what upstream hands on for a
    search query or an answer (the environment's action)."""
    span = first_tag(text, tag)
    return f"<{tag}>{span.content}</{tag}>" if span else ""


def tag_tidied(text: str, tag: str) -> str:
    """The whole output with the first tag's content stripped (unchanged without a tag):
    what upstream hands on for a verdict, and what the team then reads."""
    span = first_tag(text, tag)
    if span is None:
        return text
    return text[:span.start + span.open_len] + span.content + text[span.end:]


def verdict(text: str, tag: str, choices: tuple[str, ...], lowercase: bool) -> str:
    """The first of `choices` whose exact `<tag>choice</tag>` occurs in the tidied output
    (lower-cased first when `lowercase`); `choices[0]` when none does."""
    tidied = tag_tidied(text, tag)
    if lowercase:
        tidied = tidied.lower()
    return next((c for c in choices if f"<{tag}>{c}</{tag}>" in tidied), choices[0])


def has_cjk(text: str) -> bool:
    """Whether `text` holds a CJK unified ideograph (U+4E00..U+9FFF)."""
    return CJK.search(text) is not None


def one_think_pair(text: str) -> bool:
    """Exactly one `<think>` and one `</think>`, the closing one after the opening one."""
    if text.count("<think>") != 1 or text.count("</think>") != 1:
        return False
    return text.find("</think>") > text.find("<think>")
