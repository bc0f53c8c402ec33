"""Shared fixtures: a tiny tokenizer + random Qwen2 model saved to disk (seconds to build),
a generated corpus and its real pyserini BM25 index (built once per session), its searcher
and the retrieval service over it."""

from __future__ import annotations

import json
import os
import platform
import random

import pytest

from drmas.models.kernels import AVX2

# The whole test session computes with AVX2 kernels on an x86 CPU, as the default profile
# does (drmas/models/kernels.py), set before torch runs its first kernel: tests compare runs
# in this process against Ray actors and child processes, and a command run in process pins
# the variables that later children inherit, while this process keeps the kernels it started
# with. On an AVX-512 CPU a test process on AVX-512 kernels with AVX2 children then differed
# in the last bits (a Ray run against a local one; FSDP2 workers against one). On an
# AVX2-only CPU this is what runs anyway. A variable already set is kept.
if platform.machine().lower() in ("x86_64", "amd64"):
    for _name, _value in AVX2.items():
        os.environ.setdefault(_name, _value)

from drmas.data.generators.arithmetic import generate
from drmas.mas.math.demos import math_traces

SMALL = {"kind": "tiny", "hidden_size": 64, "layers": 2, "heads": 1, "intermediate_size": 128}


@pytest.fixture(autouse=True)
def cpu_kernel_variables(monkeypatch):
    """Each test starts and ends with the CPU kernels' variables of the session: a test that
    runs `drmas.cli.main` in process pins the profile's (drmas/models/kernels.py), and a later
    test's Ray actors or child processes would inherit them."""
    for name in AVX2:               # setenv records the value to restore, unset included
        was = os.environ.get(name)
        monkeypatch.setenv(name, was or "")
        if was is None:
            monkeypatch.delenv(name)


@pytest.fixture(scope="session")
def math_rows():
    return generate({"arith-1": {"level": 1}, "arith-2": {"level": 2}}, 200, 10, seed=0)


def math_tokenizer(math_rows):
    """The tiny models' tokenizer: 320 tokens trained on the math warm-start traces of the
    train rows of `math_rows`."""
    from drmas.models.tiny import train_tokenizer

    traces = math_traces([r for r in math_rows if r["split"] == "train"], seed=0, mistake_rate=0.3)
    return train_tokenizer((m[-1]["content"] + "\n" + r for _, m, r in traces), 320)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, math_rows):
    """A saved tokenizer + randomly initialised tiny Qwen2 model (no training)."""
    import torch

    from drmas.models.tiny import tiny_model

    torch.set_num_threads(1)
    tok = math_tokenizer(math_rows)
    model = tiny_model(SMALL, len(tok), seed=0)
    path = tmp_path_factory.mktemp("tiny_model")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


N_DOCS = 300
SYLLABLES = "ka lo mir ven tra sol qua dre fin gor hal ix jun pel rum sav tok ulm wen zor".split()
KINDS = ["river", "fortress", "guild", "comet", "festival", "dialect", "orchard", "engine"]


def make_corpus(n: int = N_DOCS, seed: int = 0) -> list[dict]:
    """n fictional documents {"id", "contents": "Title\\ntext"} with distinct titles.

    Title words come from a shared pool, so titles overlap word-wise and texts mention other
    entries: exact-title queries have to beat real competition.
    """
    rng = random.Random(seed)
    pool = sorted({"".join(rng.sample(SYLLABLES, 3)).capitalize() for _ in range(4 * n)})
    titles: list[str] = []
    while len(titles) < n:
        title = " ".join(rng.sample(pool, 2))
        if title not in titles:
            titles.append(title)
    rows = []
    for i, title in enumerate(titles):
        kind, other = rng.choice(KINDS), rng.choice(titles)
        text = (
            f"{title} is a {kind} first recorded in the year {rng.randint(900, 1900)}. "
            f"Chroniclers compare it with {other}, and it is known for {rng.choice(pool)} lore."
        )
        rows.append({"id": f"doc{i}", "contents": f"{title}\n{text}"})
    return rows


@pytest.fixture(scope="session")
def bm25_index(tmp_path_factory):
    """(corpus rows, index dir): a real pyserini index of make_corpus(), built once per session."""
    pytest.importorskip("pyserini", reason="pyserini is not installed (pyserini==1.6.0)")
    from drmas.retrieval.kinds import build_index

    root = tmp_path_factory.getbasetemp() / "bm25"
    rows = make_corpus()
    index_dir = root / "index"
    if not index_dir.exists():
        root.mkdir(exist_ok=True)
        corpus = root / "corpus" / "wiki.jsonl"
        corpus.parent.mkdir()
        corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
        build_index(corpus, index_dir, threads=2)
    return rows, index_dir


@pytest.fixture(scope="session")
def searcher(bm25_index):
    from drmas.retrieval.searcher import BM25Searcher

    with BM25Searcher(bm25_index[1]) as s:
        yield s


@pytest.fixture(scope="module")
def service(searcher):
    """The retrieval service over `searcher` on a free port of 127.0.0.1, one per module."""
    from drmas.retrieval.server import RetrievalServer

    with RetrievalServer(searcher, port=0, threads=2).start() as server:
        yield server


@pytest.fixture
def rng():
    return random.Random(0)


def make_config(model_path, **train):
    """A small valid Config whose models are the fixture model (kind: pretrained)."""
    from drmas.config.profile import from_dict

    raw = {
        "profile": "test", "seeds": [0], "suites": ["math"], "methods": ["grpo", "drmas"],
        "assignments": ["shared", "nonshared"],
        "models": {"small": {"kind": "pretrained", "path": str(model_path), "dtype": "float32"}},
        "assignment_defs": {"shared": {"share": True, "models": {"default": "small"}},
                            "nonshared": {"share": False, "models": {"default": "small"}}},
        "train": {"steps": 2, "prompts_per_step": 2, "group_n": 4, "ppo_mini_batches": 1,
                  "micro_batch_rows": 8, "lr": 1e-3, "max_response_tokens": 8, "save_every": 1,
                  "loss_aggregation": "minibatch", "log_ratio_clamp": 20.0, "per_slot_uids": False,
                  "max_prompt_tokens": 448, **train},
        "eval": {"n": 4, "batch_size": 64, "max_problems_per_source": 3},
        "resources": {"backend": "local"},
        "prompt_set": "compact",
    }
    return from_dict(raw)


def math_suite(**over):
    from drmas.config.suites import Suite

    spec = dict(name="math", mas="math", agents=["solver", "verifier"], reward="math",
                invalid_penalty=0.1, datasets={}, mas_options={"max_loop": 2})
    spec.update(over)
    return Suite(**spec)


# Modules whose tests start a JVM (pyserini) inside the pytest process.
JVM_MODULES = {"test_knowledge", "test_retrieval", "test_retrieval_service", "test_retrieval_faults",
               "test_retrieval_dense", "test_search_traces"}


def pytest_collection_modifyitems(items):
    """Run the JVM tests before all others. `ray.init` installs Ray's own SIGSEGV handler in
    the calling process; a JVM already running there uses SIGSEGV internally (implicit null
    checks in compiled code), and once Ray's handler sits in front of the JVM's, such a routine
    signal kills the process (seen once in CI as a segfault in a retrieval test that ran after
    the Ray tests). Running every JVM call before the first `ray.init` avoids the overlap."""
    items.sort(key=lambda item: 0 if item.module.__name__.rsplit(".", 1)[-1] in JVM_MODULES else 1)
