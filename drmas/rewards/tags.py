"""Tag extraction in time linear in the text, whatever the text holds.

`re.findall(r"<t>(.*?)</t>")` retries its lazy scan from every `<t>` when no `</t>` follows,
so a response of many unclosed tags costs O(n^2) (64 KB of `<answer>`: 3 s; 1 MB: hours), and
rewards and agent parsers run on every model output. The scan below returns exactly what the
last element of that `findall` would (same pairing: each match is the first opener after the
previous match's end with the first closer after it), but each character is looked at a
bounded number of times: once no closer follows an opener, no later opener can have one.
"""

from __future__ import annotations


def tag_spans(text: str, tag: str) -> list[tuple[int, int]]:
    """(start, end) of the content of every `<tag>...</tag>`, as `re.findall` pairs them."""
    opener, closer = f"<{tag}>", f"</{tag}>"
    spans, pos = [], 0
    while True:
        start = text.find(opener, pos)
        if start < 0:
            return spans
        start += len(opener)
        end = text.find(closer, start)
        if end < 0:
            return spans
        spans.append((start, end))
        pos = end + len(closer)


def last_tag(text: str, tag: str) -> str | None:
    """Content of the last `<tag>...</tag>` in `text` (stripped), or None when there is none."""
    spans = tag_spans(text, tag)
    if not spans:
        return None
    start, end = spans[-1]
    return text[start:end].strip()
