"""Build a BM25 (Lucene) index of a JSONL corpus with pyserini (dense indexes: `dense.py`; the
factory that picks one by kind: `kinds.py`).

The corpus is Search-R1's wiki-18 format: one JSON object per line, `{"id": …, "contents":
"Title\\ntext"}`. Indexing runs `python -m pyserini.index.lucene` in a subprocess (through
`drmas.retrieval.java`, which applies the JVM workarounds) so that the indexer's JVM and heap
live and die with the job instead of the caller.

The corpus is validated first (encoding, JSON, fields, unique ids), so a malformed file fails
in seconds with a line number rather than deep inside Java, or indexed with a document
twice. Anserini indexes every file of its input folder, so the corpus is linked alone into a
staging folder; the index is written next to `index_dir` and renamed into place only when
complete, so an interrupted build never looks like a finished index.
"""

from __future__ import annotations

import array
import collections
import json
import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

import drmas
from drmas.data.io import parse_line
from drmas.errors import DataError, DrmasError

log = logging.getLogger(__name__)


def validate_corpus(corpus_jsonl: str | Path) -> int:
    """Check every line of the corpus and return the number of documents.

    Each non-blank line must be a UTF-8 JSON object with a string or integer `id`, unique in
    the file, and a non-empty string `contents`; raises DataError naming the file and line
    otherwise. Ids are checked by 64-bit hashes (8 bytes per document, wiki-18 included); a
    repeated hash is confirmed by a second pass that names both lines.
    """
    path = Path(corpus_jsonl)
    if not path.is_file():
        raise DataError(f"corpus not found: {path}")
    hashes = array.array("q")
    try:
        with path.open("rb") as f:
            for lineno, raw in enumerate(f, start=1):
                docid = _check_line(raw, f"{path}:{lineno}")
                if docid is not None:
                    hashes.append(hash(docid))
    except OSError as err:
        raise DataError(f"{path}: cannot read ({err.strerror or err})") from None
    if not hashes:
        raise DataError(f"corpus is empty: {path}")
    ordered = np.sort(np.frombuffer(hashes, dtype=np.int64))
    if (ordered[1:] == ordered[:-1]).any():
        _name_duplicate(path, set(ordered[1:][ordered[1:] == ordered[:-1]].tolist()))
    return len(hashes)


def _check_line(raw: bytes, where: str) -> str | None:
    """The document id of one corpus line (None for a blank line); DataError when malformed."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DataError(f"{where}: not UTF-8 (byte 0x{raw[err.start]:02x} at column "
                        f"{err.start + 1}); convert the corpus to UTF-8") from None
    if not line.strip():
        return None
    row = parse_line(line, where)
    for name in ("id", "contents"):
        if name not in row:
            raise DataError(f"{where}: missing field '{name}' (a corpus row is "
                            '{"id": …, "contents": "Title\\ntext"})')
    docid, contents = row["id"], row["contents"]
    if isinstance(docid, bool) or not isinstance(docid, (str, int)) or str(docid) == "":
        raise DataError(f"{where}: 'id' must be a non-empty string or an integer")
    if not isinstance(contents, str) or not contents.strip():
        raise DataError(f"{where}: 'contents' must be a non-empty string ('Title\\ntext')")
    return str(docid)


def _name_duplicate(path: Path, suspects: set[int]) -> None:
    """Second pass over a corpus whose id hashes repeat: DataError for the first real repeat."""
    first_line: dict[str, int] = {}
    with path.open("rb") as f:
        for lineno, raw in enumerate(f, start=1):
            if raw.strip():
                docid = str(json.loads(raw)["id"])
                if hash(docid) not in suspects:
                    continue
                if docid in first_line:
                    raise DataError(f"{path}:{lineno}: duplicate id {docid!r} (first at line "
                                    f"{first_line[docid]}); ids must be unique")
                first_line[docid] = lineno


def build_bm25_index(corpus_jsonl: str | Path, index_dir: str | Path, threads: int = 1) -> Path:
    """BM25-index `corpus_jsonl` into `index_dir` (replaced if it exists); return `index_dir`.

    Positions, document vectors and raw documents are stored, as pyserini's own wiki indexes
    do; the raw JSON is what searchers return to agents.
    """
    corpus = Path(corpus_jsonl).resolve()
    n_docs = validate_corpus(corpus)
    index_dir, staging, partial = work_dirs(index_dir)
    try:
        (staging / "corpus.jsonl").symlink_to(corpus)
        output = _run_indexer(staging, partial, threads)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    indexed = _indexed_count(output)
    if indexed is not None and indexed != n_docs:
        shutil.rmtree(partial, ignore_errors=True)
        raise DrmasError(f"indexed {indexed} of {n_docs} documents of {corpus}; see the log")
    shutil.rmtree(index_dir, ignore_errors=True)
    partial.rename(index_dir)
    log.info("indexed %d documents of %s into %s", n_docs, corpus, index_dir)
    return index_dir


def work_dirs(index_dir: str | Path) -> tuple[Path, Path, Path]:
    """(index folder, its input staging folder, the folder the index is built in), the last
    two fresh: an index is built beside its folder and renamed into place only when complete,
    so a killed build never leaves a folder that looks like an index."""
    index_dir = Path(index_dir).resolve()
    index_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = index_dir.with_name(index_dir.name + ".input")
    partial = index_dir.with_name(index_dir.name + ".partial")
    for leftover in (staging, partial):
        shutil.rmtree(leftover, ignore_errors=True)
    staging.mkdir()
    return index_dir, staging, partial


def _run_indexer(input_dir: Path, index_dir: Path, threads: int) -> list[str]:
    """Run Anserini's IndexCollection via pyserini; stream its log, return its output lines."""
    cmd = [
        sys.executable, "-m", "drmas.retrieval.java", "pyserini.index.lucene",
        "--collection", "JsonCollection",
        "--input", str(input_dir),
        "--index", str(index_dir),
        "--generator", "DefaultLuceneDocumentGenerator",
        "--threads", str(max(1, int(threads))),
        "--storePositions", "--storeDocvectors", "--storeRaw",
    ]  # fmt: skip
    env = dict(os.environ)
    # The child must import this same drmas, installed or not.
    package_root = str(Path(drmas.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    tail: collections.deque[str] = collections.deque(maxlen=15)
    lines: list[str] = []
    with subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip()
            log.debug("%s", line)
            tail.append(line)
            if "indexed" in line:
                lines.append(line)
    if proc.returncode != 0:
        shutil.rmtree(index_dir, ignore_errors=True)
        log.error("pyserini indexing output (last lines):\n%s", "\n".join(tail))
        errors = [t for t in tail if "Exception" in t or "ERROR" in t] or list(tail)
        first = errors[0].strip() if errors else "no output"
        raise DrmasError(f"pyserini indexing failed (exit {proc.returncode}): {first}")
    return lines


def _indexed_count(lines: list[str]) -> int | None:
    """Documents indexed according to Anserini's summary ("indexed: N"); None if not reported."""
    for line in reversed(lines):
        match = re.search(r"\bindexed:\s+([\d,]+)", line)
        if match:
            return int(match.group(1).replace(",", ""))
    return None
