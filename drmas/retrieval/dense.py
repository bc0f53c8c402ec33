"""Dense retrieval: an e5-style encoder and a FAISS flat inner-product index, via pyserini.

This is the paper's retriever (Search-R1's e5-base-v2 over wiki-18): documents are encoded
as "passage: {contents}", queries as "query: {query}", each by mean pooling of the last
hidden states over the real tokens, L2-normalised, at most `max_length` tokens; the score
is the inner product (cosine). The index is built by pyserini's own encoder command
(`python -m pyserini.encode … --to-faiss`, its `AutoDocumentEncoder` with mean pooling,
`--l2-norm` and the "passage:" prefix), in a subprocess, on the GPU when there is one.
Queries are searched by pyserini's `FaissSearcher` with `E5QueryEncoder`, which encodes a
whole batch in one forward pass.

A FAISS index stores vectors and docids only, so the folder also keeps the documents:
`docs.jsonl` in index order with `docs.offsets.npy` (byte offset of each line), read by seek
and not held in memory. `dense.json` records how the index was built; `drmas serve` and
`open_searcher` read it to tell a dense folder from a Lucene one.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np

import drmas
from drmas.data.io import read_json
from drmas.errors import DrmasError
from drmas.retrieval.index import validate_corpus, work_dirs
from drmas.retrieval.searcher import Hit, Searcher, isolate_failures

log = logging.getLogger(__name__)

DENSE_META = "dense.json"
DOCS, OFFSETS = "docs.jsonl", "docs.offsets.npy"
E5 = {"pooling": "mean", "l2_norm": True, "query_prefix": "query:",
      "passage_prefix": "passage:", "max_length": 256}  # pyserini adds the space after a prefix
ENCODE_CHUNK = 256  # queries per forward pass


def default_device() -> str:
    """"cuda:0" when torch sees a GPU, else "cpu"."""
    import torch

    return "cuda:0" if torch.cuda.is_available() else "cpu"


def encoder_dimension(encoder: str | Path) -> int:
    """The embedding size of a transformers encoder; DrmasError naming it when it cannot load."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(str(encoder))
    except (OSError, ValueError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise DrmasError(f"cannot load encoder {str(encoder)!r} (a local folder with config.json "
                         f"and a tokenizer, or a reachable hub id): {first}") from None
    size = getattr(config, "hidden_size", None)
    if not isinstance(size, int):
        raise DrmasError(f"encoder {str(encoder)!r} has no hidden_size in its config")
    return size


def build_dense_index(corpus_jsonl: str | Path, index_dir: str | Path, encoder: str | Path,
                      batch_size: int = 64, max_length: int = E5["max_length"],
                      device: str | None = None) -> Path:
    """Encode `corpus_jsonl` with `encoder` into a FAISS index at `index_dir` (replaced).

    Built beside `index_dir` and renamed into place only when complete."""
    corpus = Path(corpus_jsonl).resolve()
    n_docs = validate_corpus(corpus)
    encoder = str(Path(encoder).resolve()) if Path(encoder).exists() else str(encoder)
    dimension = encoder_dimension(encoder)
    device = device or default_device()
    index_dir, staging, partial = work_dirs(index_dir)
    partial.mkdir()
    try:
        _write_inputs(corpus, staging / "corpus.jsonl", partial)
        _run_encoder(staging, partial, encoder, dimension, batch_size, max_length, device)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    encoded = sum(1 for _ in (partial / "docid").open())
    if encoded != n_docs:
        shutil.rmtree(partial, ignore_errors=True)
        raise DrmasError(f"encoded {encoded} of {n_docs} documents of {corpus}; see the log")
    meta = {"kind": "dense", "encoder": encoder, "dimension": dimension, "num_docs": n_docs,
            "corpus": str(corpus), **E5, "max_length": int(max_length)}
    (partial / DENSE_META).write_text(json.dumps(meta, indent=1) + "\n")
    shutil.rmtree(index_dir, ignore_errors=True)
    partial.rename(index_dir)
    log.info("encoded %d documents of %s into %s (%s)", n_docs, corpus, index_dir, device)
    return index_dir


def _write_inputs(corpus: Path, encoder_input: Path, out_dir: Path) -> None:
    """The encoder's input ({"id", "text": contents}: one field, so pyserini does not split
    "Title\\ntext" into fields) and the document store, both in corpus order."""
    offsets = []
    with corpus.open(encoding="utf-8") as rows, encoder_input.open("w") as enc, \
            (out_dir / DOCS).open("wb") as docs:
        for line in rows:
            if not line.strip():
                continue
            row = json.loads(line)
            docid, contents = str(row["id"]), row["contents"]
            enc.write(json.dumps({"id": docid, "text": contents}) + "\n")
            offsets.append(docs.tell())
            docs.write((json.dumps({"id": docid, "contents": contents}) + "\n").encode())
    np.save(out_dir / OFFSETS, np.asarray(offsets, dtype=np.int64))


def _run_encoder(input_dir: Path, out_dir: Path, encoder: str, dimension: int,
                 batch_size: int, max_length: int, device: str) -> None:
    """pyserini's corpus encoder, writing a FAISS flat IP index and docids to `out_dir`."""
    cmd = [
        sys.executable, "-m", "drmas.retrieval.java", "pyserini.encode",
        "input", "--corpus", str(input_dir), "--fields", "text",
        "output", "--embeddings", str(out_dir), "--to-faiss",
        "encoder", "--encoder", encoder, "--encoder-class", "auto", "--fields", "text",
        "--pooling", E5["pooling"], "--l2-norm", "--prefix", E5["passage_prefix"],
        "--max-length", str(int(max_length)), "--batch-size", str(max(1, int(batch_size))),
        "--dimension", str(dimension), "--device", device,
    ]  # fmt: skip
    env = dict(os.environ)
    package_root = str(Path(drmas.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, errors="replace")
    for line in proc.stdout.splitlines():
        log.debug("%s", line)
    if proc.returncode != 0:
        tail = [t for t in proc.stdout.strip().splitlines() if t.strip()][-15:]
        log.error("pyserini encoding output (last lines):\n%s", "\n".join(tail))
        errors = [t for t in tail if "Error" in t or "Exception" in t] or tail
        raise DrmasError(f"pyserini encoding failed (exit {proc.returncode}): "
                         f"{errors[-1].strip() if errors else 'no output'}")


class DocStore:
    """Documents of a dense index by position, read from disk on demand."""

    def __init__(self, index_dir: Path):
        self._offsets = np.load(index_dir / OFFSETS)
        self._file = (index_dir / DOCS).open("rb")
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._offsets)

    def contents(self, row: int) -> str:
        with self._lock:
            self._file.seek(int(self._offsets[row]))
            line = self._file.readline()
        return json.loads(line)["contents"]

    def close(self) -> None:
        self._file.close()


def make_query_encoder(encoder: str, device: str, max_length: int, prefix: str):
    """An `E5QueryEncoder` (defined on first use: pyserini's import needs the JVM first)."""
    import torch
    from pyserini.encode import AutoQueryEncoder, DocumentEncoder

    class E5QueryEncoder(AutoQueryEncoder):
        """pyserini's AutoQueryEncoder, e5-style and batched (FaissSearcher calls encode_batch)."""

        def __init__(self):
            super().__init__(encoder_dir=encoder, device=device, pooling="mean", l2_norm=True,
                             prefix=prefix)
            self.model.eval()
            self.max_length = max_length

        def encode(self, query: str, max_length: int | None = None) -> np.ndarray:
            return self.encode_batch([query])[0]

        @torch.no_grad()
        def encode_batch(self, queries: list[str]) -> np.ndarray:
            out = []
            for i in range(0, len(queries), ENCODE_CHUNK):
                texts = [f"{self.prefix} {q}" for q in queries[i : i + ENCODE_CHUNK]]
                inputs = self.tokenizer(texts, max_length=self.max_length, truncation=True,
                                        padding="longest", return_token_type_ids=False,
                                        return_tensors="pt").to(self.device)
                hidden = self.model(**inputs)[0]
                pooled = DocumentEncoder._mean_pooling(hidden, inputs["attention_mask"])
                out.append(torch.nn.functional.normalize(pooled, dim=-1).float().cpu().numpy())
            return np.concatenate(out)

    return E5QueryEncoder()


class DenseSearcher(Searcher):
    """In-process dense search over a folder built by `build_dense_index`; like BM25Searcher.

    All encoder and FAISS calls run on one thread at a time (a lock): the service batches
    concurrent requests itself, and torch and FAISS each use several threads per call."""

    kind = "dense"

    def __init__(self, index_dir: str | Path, encoder: str | Path | None = None,
                 device: str | None = None, max_heap: str | None = None):
        index_dir = Path(index_dir)
        meta_path = index_dir / DENSE_META
        if not meta_path.is_file():
            raise DrmasError(f"no dense index at {index_dir} (build it with "
                             "`drmas index --kind dense --encoder PATH`)")
        self.meta = read_json(meta_path, what="dense index metadata")
        self.index_dir = index_dir
        self.encoder = str(encoder or self.meta["encoder"])
        encoder_dimension(self.encoder)  # a missing encoder: one line, before pyserini loads
        self.device = device or default_device()
        from drmas.retrieval.java import ensure_jvm

        ensure_jvm(max_heap)  # pyserini.search imports its Lucene side too
        from pyserini.search.faiss import FaissSearcher

        query_encoder = make_query_encoder(self.encoder, self.device, self.meta["max_length"],
                                           self.meta["query_prefix"])
        self._searcher = FaissSearcher(str(index_dir), query_encoder)
        if self._searcher.dimension != len(query_encoder.encode("dimension check")):
            raise DrmasError(f"encoder {self.encoder} does not match the index at {index_dir} "
                             f"({self._searcher.dimension} dimensions)")
        self._docs = DocStore(index_dir)
        self._row = {docid: row for row, docid in enumerate(self._searcher.docids)}
        self._lock = threading.Lock()

    def _search_checked(self, queries: list[str], k: int, threads: int
                        ) -> tuple[list[list[Hit]], dict[int, str]]:
        with self._lock:
            return isolate_failures(lambda qs: self._batch(qs, k, threads),
                                    lambda q: self._batch([q], k, threads)[0], queries)

    def _batch(self, queries: list[str], k: int, threads: int) -> list[list[Hit]]:
        qids = [str(i) for i in range(len(queries))]
        results = self._searcher.batch_search(queries, qids, k=k, threads=threads)
        return [[Hit.from_contents(r.docid, self._docs.contents(self._row[r.docid]), r.score)
                 for r in results[qid]] for qid in qids]

    def close(self) -> None:
        self._docs.close()

    def __enter__(self) -> "DenseSearcher":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
