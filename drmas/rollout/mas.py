"""Run a MAS over a batch of problems with worker groups as the model backend.

Shared by training and evaluation: each agent's calls across all episodes go to its group as
one batched generate call, with a seed derived from (base seed, agent, call index), so a run
is reproducible whatever the batch composition of other agents.
"""

from __future__ import annotations

import zlib
from typing import Callable, Sequence

from drmas.mas.base import Episode, Orchestra
from drmas.rollout.base import Sampling


def derived_seed(*parts) -> int:
    """A stable 31-bit seed from any printable parts (Python's hash() is salted per process)."""
    return zlib.crc32("/".join(map(str, parts)).encode()) & 0x7FFFFFFF


def make_retriever_for(suite, index: str | None = None, url: str | None = None, settings=None):
    """The retriever a searching MAS uses: a service at `url`, or a private service over
    `index` in a child process (never a JVM inside a process that runs Ray: see
    drmas/retrieval/local.py); `settings` is the config's `retrieval:` block."""
    if not suite.retrieval:
        return None
    from drmas.errors import ConfigError
    from drmas.retrieval.client import RetrievalClient
    from drmas.retrieval.local import LocalService

    if not (index or url):
        raise ConfigError(f"suite {suite.name!r} searches an index: pass --index or --retriever-url")
    if settings is None:
        from drmas.config.profile import RetrievalConfig
        settings = RetrievalConfig()
    client = dict(timeout_s=settings.timeout_s, retries=settings.retries,
                  deadline_s=settings.deadline_s)
    if url:
        return RetrievalClient(url, **client)
    return LocalService(index, jvm_heap=settings.jvm_heap, threads=settings.threads,
                        deadline_s=settings.deadline_s)


def build_orchestra(cfg, suite, retriever=None) -> Orchestra:
    """The suite's MAS (an `Orchestra`, drmas/mas/base.py) with its options (the benchmark
    file's `mas_options` and the profile's over them: `drmas.config.suites.mas_options`), the
    profile's prompt set (drmas/mas/prompting.py) and `retriever` (for a searching MAS)."""
    from drmas.config.suites import mas_options
    from drmas.registry import MAS

    return MAS.get(suite.mas)(mas_options(cfg, suite), prompt_set=cfg.prompt_set,
                              retriever=retriever)


def run_mas(orchestra, problems: Sequence[dict], groups: dict, agent_group: dict[str, str],
            sampling: Callable[[str], Sampling], seed: int) -> list[Episode]:
    """Roll out `orchestra` once per problem; agent calls are routed to `groups[agent_group[a]]`."""
    calls = {"n": 0}

    def act(agent: str, prompts):
        calls["n"] += 1
        group = groups[agent_group[agent]]
        return group.generate(prompts, sampling(agent), derived_seed(seed, agent, calls["n"]))

    return orchestra.run(list(problems), act)


def score_episodes(episodes: list[Episode], reward: Callable[[str, list[str]], float]) -> list[float]:
    """Team outcome reward of each episode (before per-row format penalties)."""
    out = []
    for ep in episodes:
        if ep.info.get("forced_zero"):       # e.g. search: no tagged answer by the last turn
            out.append(0.0)
        else:
            out.append(float(reward(ep.answer, ep.problem["answers"])))
    return out
