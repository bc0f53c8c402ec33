"""Lemma 4.2's prediction before any RL run: an RL step's batch drawn from an evaluation's
samples, and what GRPO and Dr. MAS would train on in it.

An experiment on a regime (docs/regimes.md) states before its runs how much larger GRPO's
gradient for an agent should be than Dr. MAS's. The base models' evaluation holds what the
first RL steps will see: each problem's samples, split into groups of the run's `group_n`
(consecutive sample indices; a remainder is left out), are prompt groups; every turn of a
sample is a row whose score is the episode's team reward less the suite's format penalty when
the turn is malformed, as the trainer scores rows (`drmas.train.trainer.episode_rows`). On
that batch `drmas.algos.advantages.lemma_prediction`, the function every RL step logs, gives
per agent and per prompt-group estimator the mean squared advantages, their ratio over Dr.
MAS's (`predicted_ratio`) and the lemma's factor. Rows are in the order upstream's batch holds
them (`upstream_batch_order` for the assignment's worker groups), which only ``grpo_2025``
reads (a trajectory's first row).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from drmas.algos.advantages import lemma_prediction
from drmas.errors import ConfigError, DataError
from drmas.algos.batching import upstream_batch_order


def read_samples(path) -> list[dict]:
    """The samples of `drmas evaluate`'s `samples.jsonl`, with the keys this module reads."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such samples file (written by `drmas evaluate`)")
    samples = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                sample = json.loads(line)
            except json.JSONDecodeError as err:
                raise DataError(f"{path}:{number}: not JSON ({err.msg})") from None
            missing = {"problem_id", "sample", "score", "turns"} - set(sample)
            if missing:
                raise DataError(f"{path}:{number}: a sample without {', '.join(sorted(missing))}")
            samples.append(sample)
    if not samples:
        raise DataError(f"{path}: no samples")
    return samples


def batch_from_samples(samples: list[dict], group_n: int, penalty: float,
                       agent_group: dict[str, str] | None = None):
    """(scores, uid, traj_uid, agent, order, groups) of the batch the samples make: per
    problem, its samples sorted by index and cut into groups of `group_n` (uid
    ``<problem>/<k>``), one row per turn scored ``score - penalty`` when the turn is
    malformed. `order`: upstream's batch order for the worker groups of `agent_group` (agent
    -> group, groups in the order of their first agent); None keeps the rows' own order.
    `groups`: the team rewards of each prompt group, for the share of groups GRPO learns from."""
    if group_n < 2:
        raise ConfigError(f"group_n must be at least 2 for a prompt group, got {group_n}")
    by_problem = defaultdict(list)
    for s in samples:
        by_problem[s["problem_id"]].append(s)
    scores, uid, traj, agent, groups = [], [], [], [], []
    for pid, mine in by_problem.items():
        mine.sort(key=lambda s: s["sample"])
        for k in range(len(mine) // group_n):
            members = mine[k * group_n:(k + 1) * group_n]
            groups.append([float(s["score"]) for s in members])
            for s in members:
                for turn in s["turns"]:
                    scores.append(float(s["score"]) - penalty * (0.0 if turn["valid"] else 1.0))
                    uid.append(f"{pid}/{k}")
                    traj.append(f"{pid}/{k}/{s['sample']}")
                    agent.append(turn["agent"])
    if not groups:
        raise DataError(f"no problem has {group_n} samples: nothing forms a prompt group")
    order = None
    if agent_group is not None:
        unknown = sorted(set(agent) - set(agent_group))
        if unknown:
            raise DataError(f"the samples' agents {', '.join(unknown)} are not the suite's "
                             f"({', '.join(agent_group)})")
        order = upstream_batch_order([{"group": agent_group[a]} for a in agent],
                                     list(dict.fromkeys(agent_group.values())))
    return np.asarray(scores), uid, traj, agent, order, groups


def predict_from_samples(samples: list[dict], group_n: int, penalty: float,
                         agent_group: dict[str, str] | None = None,
                         estimators=None) -> dict:
    """The prediction for the samples' batch: per agent the `lemma_prediction` keys, and a
    summary: episodes and those left out, prompt groups and the share with unequal team
    rewards (the groups any prompt-group estimator learns from), and the share of episodes
    in which each agent speaks (an agent absent from most episodes is the lemma's case)."""
    scores, uid, traj, agent, order, groups = batch_from_samples(samples, group_n, penalty,
                                                                 agent_group)
    used = len(groups) * group_n
    speaks = Counter(a for s in samples for a in {t["agent"] for t in s["turns"]})
    return {
        "episodes": len(samples), "episodes_used": used, "group_n": group_n, "penalty": penalty,
        "groups": len(groups),
        "unequal_groups": sum(len(set(g)) > 1 for g in groups) / len(groups),
        "team_reward": float(np.mean([s["score"] for s in samples])),
        "speaks": {a: n / len(samples) for a, n in sorted(speaks.items())},
        "agents": lemma_prediction(scores, uid, traj, agent, estimators=estimators, order=order),
    }


def _estimators(agents: dict) -> list[str]:
    """The prompt-group estimators a prediction holds, GRPO first (its keys carry no suffix)."""
    names = ["grpo"]
    for keys in agents.values():
        for key in keys:
            if key.startswith("predicted_ratio_") and key[len("predicted_ratio_"):] not in names:
                names.append(key[len("predicted_ratio_"):])
    return names


def format_prediction(result: dict) -> str:
    """A Markdown summary: the batch, then one table per estimator."""
    def num(value, digits=3):
        return "—" if value is None else f"{value:.{digits}g}"

    lines = [f"{result['episodes_used']} of {result['episodes']} episodes in {result['groups']} "
             f"prompt groups of {result['group_n']} (format penalty {result['penalty']:g}); "
             f"team reward {result['team_reward']:.3f}; groups with unequal team rewards "
             f"{100 * result['unequal_groups']:.1f}%",
             "episodes in which each agent speaks: " + ", ".join(
                 f"{a} {100 * v:.1f}%" for a, v in result["speaks"].items())]
    agents = result["agents"]
    for est in _estimators(agents):
        suffix = "" if est == "grpo" else f"_{est}"
        sq = "grpo_adv_sq" if est == "grpo" else f"{est}_adv_sq"
        lines += ["", f"| agent | rows | {est} mean A^2 | Dr. MAS mean A^2 | predicted ratio "
                      f"| lemma factor |", "|---|---:|---:|---:|---:|---:|"]
        for a, keys in agents.items():
            lines.append(f"| {a} | {keys.get('lemma_rows' + suffix, '—')} | {num(keys.get(sq))} "
                         f"| {num(keys.get('drmas_adv_sq'))} "
                         f"| {num(keys.get('predicted_ratio' + suffix))} "
                         f"| {num(keys.get('lemma_factor' + suffix))} |")
    return "\n".join(lines)
