"""Evaluation: n samples per test problem through the MAS -> samples.jsonl, scores.json.

avg@n is the mean per-problem success rate; pass@n the share of problems solved at least
once (the unbiased pass@k estimator at k = n), per data_source and overall.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd

from drmas.config.groups import engine_options, model_dir, plan_groups
from drmas.config.profile import Config
from drmas.config.suites import Suite
from drmas.data.io import atomic_path, atomic_write_text, read_json
from drmas.errors import ConfigError
from drmas.evaluation.metrics import aggregate
from drmas.rewards import get_reward
from drmas.rollout.base import Sampling
from drmas.rollout.mas import build_orchestra, derived_seed, run_mas, score_episodes
from drmas.rollout.sampler import SamplingGroup, local_device
from drmas.status.progress import bar as progress_bar

def cap_per_source(rows: list[dict], cap: int | None) -> list[dict]:
    """The first `cap` problems of each data_source (all when cap is None)."""
    if cap is None:
        return rows
    seen: dict[str, int] = {}
    out = []
    for row in rows:
        seen[row["data_source"]] = seen.get(row["data_source"], 0) + 1
        if seen[row["data_source"]] <= cap:
            out.append(row)
    return out


def behaviour(samples: pd.DataFrame, info_keys) -> dict:
    """Mean per episode of the MAS's numeric episode stats (e.g. the search MAS's
    `searched_before_answer`, `searches`), per data_source and overall: how the agents route,
    beside how often they succeed."""
    keys = [k for k in info_keys if k in samples and pd.api.types.is_numeric_dtype(samples[k])]
    if not keys:
        return {}
    per_source = samples.groupby("data_source")[keys].mean()
    return {"overall": samples[keys].mean().round(4).to_dict(),
            "per_source": {src: row.round(4).to_dict() for src, row in per_source.iterrows()}}


def group_paths(cfg: Config, suite: Suite, assignment: str, run_dir: str | Path | None,
                engine_overrides: dict | None = None, base_dirs: dict | None = None) -> dict:
    """{group: (model path, agents, settings, engine options)}: a run's final weights, or the
    base models: the warm-started ones, or the folders `base_dirs` names ({model: folder},
    e.g. a warm start of another seed) in their place."""
    plan = plan_groups(cfg, assignment, suite.agents)
    base_dirs = base_dirs or {}

    def base(model: str) -> Path:
        return Path(base_dirs[model]) if model in base_dirs else model_dir(cfg, suite.name, model)

    return {g: (Path(run_dir) / "final" / g if run_dir else base(s["model"]),
                s["agents"], s["settings"], s["encoding"],
                engine_options(cfg, s["model"], engine_overrides))
            for g, s in plan.items()}


def reuse_base(cfg: Config, suite: Suite, twin_dir, out_dir, meta: dict) -> dict:
    """This assignment's base evaluation from its twin's (`Config.base_twin`): the same
    samples, relabelled (`meta.same_as` names the twin)."""
    twin_dir, out = Path(twin_dir), Path(out_dir)
    scores = read_json(twin_dir / "scores.json", what="scores.json of `drmas evaluate`")
    twin_meta = scores.get("meta", {})
    twin, expected = twin_meta.get("assignment"), cfg.base_twin(meta["assignment"], suite.agents)
    if twin_meta.get("method") != "base" or twin != expected:
        raise ConfigError(f"{twin_dir} is not a base evaluation of an assignment with the same "
                          f"models as {meta['assignment']!r} (its twin is {expected!r})")
    out.mkdir(parents=True, exist_ok=True)
    with atomic_path(out / "samples.jsonl") as tmp:
        shutil.copyfile(twin_dir / "samples.jsonl", tmp)
    scores["meta"] = {**meta, "same_as": twin}
    atomic_write_text(out / "scores.json", json.dumps(scores, indent=1, sort_keys=True))
    return scores


def evaluate(cfg: Config, suite: Suite, assignment: str, problems: list[dict], out_dir,
             run_dir=None, seed: int = 0, meta: dict | None = None, retriever=None,
             engine_overrides: dict | None = None, base_dirs: dict | None = None) -> dict:
    e = cfg.eval
    n = e.n
    paths = group_paths(cfg, suite, assignment, run_dir, engine_overrides, base_dirs)
    device = local_device(cfg.resources)       # the GPU when there is one, like training
    groups = {g: SamplingGroup(g, p, agents, eval_batch=e.batch_size, encoding=encoding,
                               device=device, **options)
              for g, (p, agents, _, encoding, options) in paths.items()}
    agent_group = {a: g for g, (_, agents, *_) in paths.items() for a in agents}
    max_tokens = {a: cfg.agent_train(a).max_response_tokens for a in suite.agents}
    orchestra = build_orchestra(cfg, suite, retriever)
    reward = get_reward(suite.reward)
    problems = cap_per_source(problems, e.max_problems_per_source)
    batch = [p for p in problems for _ in range(n)]
    samples = []
    # episodes run `batch_size` at a time: each turn's calls of one agent form one batch
    m = meta or {}
    job = f"eval {suite.name}/{assignment}/{m.get('method', 'run' if run_dir else 'base')}/seed{seed}"
    for start in progress_bar(range(0, len(batch), e.batch_size), desc=job, job=job, mininterval=2):
        chunk = batch[start:start + e.batch_size]
        episodes = run_mas(orchestra, chunk, groups, agent_group,
                           lambda a: Sampling(e.temperature, e.top_p, max_tokens[a]),
                           derived_seed(seed, "eval", start))
        for i, (ep, s) in enumerate(zip(episodes, score_episodes(episodes, reward))):
            samples.append({"problem_id": ep.problem["id"], "data_source": ep.problem["data_source"],
                            "sample": (start + i) % n, "score": s, "answer": ep.answer,
                            "turns": [{"agent": t.agent, "text": t.gen.text, "valid": t.action.valid}
                                      for t in ep.turns], **ep.info})
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_path(out / "samples.jsonl") as tmp, open(tmp, "w") as f:
        for s in samples:
            f.write(json.dumps(s) + "\n")
    table = pd.DataFrame(samples)
    scores = aggregate(table, k=n)
    scores["behaviour"] = behaviour(table, info_keys=episodes[0].info if samples else {})
    scores["n"] = n
    scores["meta"] = meta or {}
    atomic_write_text(out / "scores.json", json.dumps(scores, indent=1, sort_keys=True))
    return scores
