"""The RL loop: rollout -> team reward -> advantages -> PPO update per worker group.

The driver holds no weights: it moves problems to the groups' engines, rows to the groups'
optimisers, and metrics to `metrics.jsonl`. Advantages are computed once, on the whole batch,
here, because the pools (global or per agent) cut across groups.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from pathlib import Path

import numpy as np
import yaml
from tqdm import tqdm

from drmas.algos.advantages import compute_advantages, group_stats, method_modes
from drmas.config import Config, Suite
from drmas.rewards import get_reward
from drmas.rollout.base import Sampling
from drmas.rollout.mas import build_orchestra, derived_seed, run_mas, score_episodes
from drmas.train.groups import model_dir, plan_groups
from drmas.train.workers import LocalGroup


class ProblemSampler:
    """Epoch-wise reshuffled cursor over the train problems; (epoch, pos) is its whole state."""

    def __init__(self, problems: list[dict], batch: int, seed: int, epoch: int = 0, pos: int = 0):
        self.problems, self.batch, self.seed = problems, batch, seed
        self.epoch, self.pos = epoch, pos
        self._order = self._shuffled(epoch)

    def _shuffled(self, epoch: int) -> list[int]:
        order = list(range(len(self.problems)))
        random.Random(derived_seed(self.seed, "epoch", epoch)).shuffle(order)
        return order

    def next(self) -> list[dict]:
        out = []
        while len(out) < self.batch:
            if self.pos == len(self._order):
                self.epoch, self.pos = self.epoch + 1, 0
                self._order = self._shuffled(self.epoch)
            out.append(self.problems[self._order[self.pos]])
            self.pos += 1
        return out

    def state(self) -> dict:
        return {"epoch": self.epoch, "pos": self.pos}


def episode_rows(episodes, team_rewards, penalty: float, agent_group: dict, n: int) -> list[dict]:
    """One row per agent call (DESIGN, "Rollout row")."""
    rows = []
    for e, (ep, reward) in enumerate(zip(episodes, team_rewards)):
        for t in ep.turns:
            rows.append({"uid": ep.problem["uid"], "traj_uid": e % n, "agent": t.agent,
                         "group": agent_group[t.agent], "turn": t.turn,
                         "prompt_ids": t.gen.prompt_ids, "response_ids": t.gen.response_ids,
                         "logprobs": t.gen.logprobs, "valid": t.action.valid,
                         "score": reward - penalty * (1.0 - float(t.action.valid))})
    return rows


def _stats(values) -> dict:
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return {"mean": 0.0, "std": 0.0}
    return {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if v.size > 1 else 0.0}


class Trainer:
    """One run: (suite, assignment, method, seed) -> `out_dir` (DESIGN, "run folder")."""

    def __init__(self, cfg: Config, suite: Suite, assignment: str, method: str, seed: int,
                 train_rows: list[dict], out_dir: str | Path, retriever=None):
        self.cfg, self.suite, self.method, self.seed = cfg, suite, method, seed
        self.assignment = assignment
        self.mean_by, self.std_by = method_modes(method)
        self.out = Path(out_dir)
        self.plan = plan_groups(cfg, assignment, suite.agents)
        self.agent_group = {a: g for g, spec in self.plan.items() for a in spec["agents"]}
        self.train = cfg.train
        self.orchestra = build_orchestra(suite, retriever)
        self.reward = get_reward(suite.reward)
        self.sampler = ProblemSampler(train_rows, self.train.prompts_per_step, seed)
        self.groups = {g: LocalGroup(g, model_dir(cfg, suite.name, spec["model"]), spec["agents"],
                                     spec["settings"])
                       for g, spec in self.plan.items()}
        self.step = 0

    def sampling(self, agent: str) -> Sampling:
        s = self.cfg.agent_train(agent)
        return Sampling(s.temperature, s.top_p, s.max_response_tokens)

    # -- one step ------------------------------------------------------------------------
    def train_step(self) -> dict:
        t0 = time.perf_counter()
        n = self.train.group_n
        problems = [dict(p, uid=f"{p['id']}@{self.step}") for p in self.sampler.next()]
        batch = [p for p in problems for _ in range(n)]
        episodes = run_mas(self.orchestra, batch, self.groups, self.agent_group, self.sampling,
                           derived_seed(self.seed, "rollout", self.step))
        t1 = time.perf_counter()
        team = score_episodes(episodes, self.reward)
        rows = episode_rows(episodes, team, self.suite.invalid_penalty, self.agent_group, n)
        t2 = time.perf_counter()
        cols = {k: [r[k] for r in rows] for k in ("uid", "traj_uid", "agent", "score")}
        adv = compute_advantages(np.asarray(cols["score"]), cols["uid"], cols["traj_uid"],
                                 cols["agent"], mean_by=self.mean_by, std_by=self.std_by,
                                 norm_by_std=self.train.norm_by_std)
        for row, a in zip(rows, adv.tolist()):
            row["advantage"] = a
        t3 = time.perf_counter()
        group_metrics = {g: grp.update([r for r in rows if r["group"] == g],
                                       seed=derived_seed(self.seed, "update", self.step, g))
                         for g, grp in self.groups.items()}
        t4 = time.perf_counter()
        self.step += 1
        return self._metrics(episodes, team, rows, group_metrics, cols,
                             {"generate": t1 - t0, "reward": t2 - t1, "advantages": t3 - t2,
                              "update": t4 - t3, "total": t4 - t0})

    def _metrics(self, episodes, team, rows, group_metrics, cols, timings) -> dict:
        agents = {}
        for agent in self.suite.agents:
            mine = [r for r in rows if r["agent"] == agent]
            g = group_metrics[self.agent_group[agent]]
            agents[agent] = {
                "calls": len(mine),
                "reward": _stats([r["score"] for r in mine]),
                "valid": float(np.mean([r["valid"] for r in mine])) if mine else 0.0,
                "advantage": {**_stats([r["advantage"] for r in mine]),
                              "absmax": max((abs(r["advantage"]) for r in mine), default=0.0)},
                "response_len": float(np.mean([len(r["response_ids"]) for r in mine])) if mine else 0.0,
                "grad_norm": g.get("agent_grad_norm", {}).get(agent),
            }
        for g in group_metrics.values():
            g.pop("agent_grad_norm", None)
        tokens = sum(len(r["response_ids"]) for r in rows)
        return {"step": self.step, "team_reward": _stats(team), "agents": agents,
                "groups": group_metrics,
                "theory": group_stats(np.asarray(cols["score"]), cols["uid"], cols["traj_uid"],
                                      cols["agent"]),
                "episodes": {k: float(np.mean([ep.info.get(k, 0) for ep in episodes]))
                             for k in episodes[0].info} if episodes else {},
                "rows": len(rows), "tokens_per_s": tokens / max(timings["generate"], 1e-9),
                "time": timings}

    # -- checkpoints ---------------------------------------------------------------------
    def save(self, path: Path, final: bool = False) -> None:
        tmp = path.with_name(path.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        for g, grp in self.groups.items():
            grp.save(tmp / g, with_optimizer=not final)
        (tmp / "trainer.json").write_text(json.dumps(
            {"step": self.step, "sampler": self.sampler.state(), "groups": self.plan_summary()}))
        shutil.rmtree(path, ignore_errors=True)
        tmp.rename(path)

    def plan_summary(self) -> dict:
        return {g: {"model": s["model"], "agents": s["agents"]} for g, s in self.plan.items()}

    def resume(self) -> bool:
        """Continue from the newest complete checkpoint, if any; True when resumed."""
        ckpts = sorted(self.out.glob("checkpoints/step*/trainer.json"),
                       key=lambda p: int(p.parent.name[4:]))
        if not ckpts:
            return False
        state = json.loads(ckpts[-1].read_text())
        for g, grp in self.groups.items():
            grp.load(ckpts[-1].parent / g)
        self.step = state["step"]
        self.sampler = ProblemSampler(self.sampler.problems, self.sampler.batch, self.seed,
                                      **state["sampler"])
        metrics = self.out / "metrics.jsonl"
        if metrics.exists():
            keep = [l for l in metrics.read_text().splitlines() if json.loads(l)["step"] <= self.step]
            metrics.write_text("".join(l + "\n" for l in keep))
        return True

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> dict:
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "config.yaml").write_text(yaml.safe_dump(
            {"config": self.cfg.raw, "suite": self.suite.name, "assignment": self.assignment,
             "method": self.method, "seed": self.seed, "groups": self.plan_summary()}, sort_keys=False))
        if not self.resume():
            (self.out / "metrics.jsonl").unlink(missing_ok=True)
        steps = self.train.steps
        bar = tqdm(total=steps, initial=self.step, desc=f"train {self.out}", mininterval=2)
        with open(self.out / "metrics.jsonl", "a") as log:
            while self.step < steps:
                m = self.train_step()
                log.write(json.dumps(m) + "\n")
                log.flush()
                bar.update(1)
                bar.set_postfix(reward=f"{m['team_reward']['mean']:.3f}", refresh=False)
                if self.step % self.train.save_every == 0 and self.step < steps:
                    self.save(self.out / "checkpoints" / f"step{self.step}")
        bar.close()
        self.save(self.out / "final", final=True)
        summary = {"steps": self.step, "groups": self.plan_summary()}
        (self.out / "summary.json").write_text(json.dumps(summary, indent=1))
        return summary
