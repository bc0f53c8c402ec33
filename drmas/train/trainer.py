"""The RL loop: rollout -> team reward -> advantages -> PPO update per worker group.

With `resources.backend: ray` the driver holds no weights: it moves problems to the groups'
engines, rows to the groups' optimisers, and metrics to `metrics.jsonl` (+ TensorBoard).
Advantages are computed once, on the whole batch, here, because the pools (global or per
agent) cut across groups. Per step: generate -> reward -> advantages -> update -> sync (each
group's engine gets the new weights), each phase timed.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import yaml

from drmas.algos.advantages import (compute_advantages, lemma_diagnostics, lemma_prediction,
                                   offset_advantages, pool_std_fractions)
from drmas.algos.batching import balanced_order, copy_indices, upstream_batch_order
from drmas.config.groups import engine_options, model_dir, plan_groups
from drmas.config.profile import Config
from drmas.config.stages import changed_keys, digest, train_key
from drmas.config.suites import Suite
from drmas.data.io import atomic_path, atomic_write_text, read_json
from drmas.errors import ConfigError, DrmasError
from drmas.registry import ESTIMATORS
from drmas.rewards import get_reward
from drmas.rollout.base import Sampling
from drmas.rollout.mas import build_orchestra, derived_seed, run_mas, score_episodes
from drmas.status.progress import bar as progress_bar
from drmas.train import checkpoint
from drmas.train.pool import WorkerLostError, make_groups
from drmas.train.schedule import group_uids, steps_for_epochs
from drmas.train.shaping import RowShaping

#: metrics keys that measure the machine, not the run: they differ between identical runs
VOLATILE = ("time", "tokens_per_s", "update_tokens_per_s", "memory")


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


def episode_rows(episodes, team_rewards, penalty: float, agent_group: dict) -> list[dict]:
    """One row per agent call (ARCHITECTURE.md, "Data contracts": rollout row).

    A row's `traj_uid` is its episode's index in the step's batch: unique per drawn slot, so
    a problem drawn twice in one step under one uid (`per_slot_uids: false`) pools 2n
    trajectories, not n that each merge an episode of both draws. Without such a repeat the
    trajectories are the same as with the rollout index within the slot (e % n)."""
    rows = []
    for e, (ep, reward) in enumerate(zip(episodes, team_rewards)):
        for t in ep.turns:
            rows.append({"uid": ep.problem["uid"], "traj_uid": e, "agent": t.agent,
                         "group": agent_group[t.agent], "turn": t.turn,
                         "prompt_ids": t.gen.prompt_ids, "response_ids": t.gen.response_ids,
                         "logprobs": t.gen.logprobs, "valid": t.action.valid,
                         "score": reward - penalty * (1.0 - float(t.action.valid))})
    return rows


def pad_group_rows(rows: list[dict], multiples: dict[str, int], rng_for) -> list[dict]:
    """`rows` and, appended after them group by group, the copies upstream's
    `adjust_batch(mode="copy")` adds to each worker group's rows (`copy_indices`): group g's
    rows, in their order, padded to a multiple of `multiples[g]` (0: none) with copies drawn
    by `rng_for(g)`, a `numpy.random.RandomState`. A copy is its row (same uid, trajectory,
    agent, response and score), marked ``copy: True``: it enters the pools and the loss as
    upstream's does. Appended at the end, each group's copies follow its rows in
    `upstream_batch_order`, as upstream concatenates them after the group's rows."""
    out = list(rows)
    for g, multiple in multiples.items():
        if not multiple:
            continue
        mine = [r for r in rows if r["group"] == g]
        out += [{**mine[i], "copy": True} for i in copy_indices(len(mine), multiple, rng_for(g))]
    return out


def balance_group_rows(rows: list[dict], worlds: dict[str, int]) -> list[dict]:
    """`rows` with each worker group's rows reordered among their own places as verl's
    `balance_batch` reorders the group's batch for its `worlds[g]` workers (`balanced_order`
    of their prompt + response tokens): in `upstream_batch_order` group g's rows are then
    worker 0's equal share, worker 1's, ..., each of similar token count, which is how verl
    deals them. One worker keeps the order. Each group's row count must divide by its worker
    count (upstream pads first: `pad_group_rows`)."""
    out = list(rows)
    for g, world in worlds.items():
        where = [i for i, r in enumerate(rows) if r["group"] == g]
        if world <= 1 or not where:
            continue
        lengths = [len(rows[i]["prompt_ids"]) + len(rows[i]["response_ids"]) for i in where]
        for place, j in zip(where, balanced_order(lengths, world).tolist()):
            out[place] = rows[where[j]]
    return out


def paired_estimators(cfg: Config) -> list[str]:
    """The prompt-group estimators besides GRPO the profile's methods use (``grpo_2025``):
    the paired measurement adds their advantage sets, each one pass more per measured step."""
    names = []
    for method in cfg.methods:
        est = ESTIMATORS.get(cfg.method(method).estimator)
        if est.baseline and est.name != "grpo" and est.name not in names:
            names.append(est.name)
    return names


def _stats(values) -> dict:
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return {"mean": 0.0, "std": 0.0}
    return {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if v.size > 1 else 0.0}


def reward_groups(episodes, team_rewards) -> dict:
    """The step's GRPO groups (the episodes of one problem uid) and the share whose team
    rewards are not all equal (spread above 1e-6). A group of equal rewards gives every
    episode the same team reward, so only per-row format penalties can make its advantages
    non-zero: the share is how much of a batch RL can learn from (a model that is always
    right, or always wrong, has none)."""
    by_uid: dict = {}
    for ep, reward in zip(episodes, team_rewards):
        by_uid.setdefault(ep.problem["uid"], []).append(float(reward))
    unequal = sum(max(r) - min(r) > 1e-6 for r in by_uid.values())
    return {"count": len(by_uid), "unequal": unequal / len(by_uid) if by_uid else 0.0}


def run_identity(cfg: Config, suite: Suite, assignment: str, method: str, seed: int) -> dict:
    """What decides a run's final weights: its train key (drmas/config/stages.py) and the content of
    its warm-started base models' weights (tiny ones, and pretrained ones with a `warmstart:`
    block): a re-made warm start is another starting point."""
    key = train_key(cfg, suite, assignment, method, seed)
    key["base_weights"] = {m: _file_digest(model_dir(cfg, suite.name, m) / "model.safetensors")
                           for m in key["models"] if cfg.warm_started(m)}
    return key


def _file_digest(path: Path) -> str | None:
    import hashlib

    if not path.exists():
        return None
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


class Trainer:
    """One run: (suite, assignment, method, seed) -> `out_dir` (ARCHITECTURE.md, "Run folder").

    Starts its worker groups (and, for `resources.backend: ray`, a local Ray instance) on
    construction; `run` shuts them down at the end, `close` does it for a trainer used step by
    step. Checkpoints go to `checkpoints` (default `<out_dir>/checkpoints`); they and `final/`
    are reused only by a run with the same identity (`run_identity`).
    """

    def __init__(self, cfg: Config, suite: Suite, assignment: str, method: str, seed: int,
                 train_rows: list[dict], out_dir: str | Path, retriever=None,
                 checkpoints: str | Path | None = None, engine_overrides: dict | None = None):
        """`engine_overrides`: {"engine", "dtype"} for every group, over the models' own."""
        self.cfg, self.suite, self.method, self.seed = cfg, suite, method, seed
        self.assignment = assignment
        self.estimator = ESTIMATORS.get(cfg.method(method).estimator)
        self.out = Path(out_dir)
        self.ckpt_root = Path(checkpoints) if checkpoints else self.out / "checkpoints"
        self.plan = plan_groups(cfg, assignment, suite.agents)
        _check_balance(cfg, self.plan)
        self.agent_group = {a: g for g, spec in self.plan.items() for a in spec["agents"]}
        self.train = cfg.train
        self.orchestra = build_orchestra(cfg, suite, retriever)
        self.reward = get_reward(suite.reward)
        self.sampler = ProblemSampler(train_rows, self.train.prompts_per_step, seed)
        self.shaping = RowShaping(self.train)     # KL in reward, loss balance (off by default)
        base_dirs = {g: model_dir(cfg, suite.name, s["model"]) for g, s in self.plan.items()}
        self.identity = run_identity(cfg, suite, assignment, method, seed)
        self.identity_hash = digest(self.identity)
        job = f"train {suite.name}/{assignment}/{method}/seed{seed}"
        # shown from the start: starting Ray and loading the groups can take a while
        self.bar = progress_bar(total=self.total_steps(), desc=job, job=job, mininterval=2,
                                postfix="starting")
        t0 = time.perf_counter()
        self.groups, self.pool = make_groups(
            self.plan, base_dirs, cfg.resources, cfg.threads,
            options={g: engine_options(cfg, s["model"], engine_overrides)
                     for g, s in self.plan.items()})
        self.startup = {"groups_s": time.perf_counter() - t0,
                        "ray_start_s": self.pool.start_s if self.pool else 0.0}
        self.step = 0

    def total_steps(self) -> int:
        """`train.steps`, or with `train.epochs` that many passes over the training set."""
        if self.train.epochs:
            return steps_for_epochs(len(self.sampler.problems), self.train.prompts_per_step,
                                    self.train.epochs)
        return self.train.steps

    def close(self) -> None:
        """Stop the groups' actors and Ray (nothing to do for local groups)."""
        self.bar.close()
        if self.pool is not None:
            try:
                for grp in self.groups.values():
                    grp.close()
            finally:
                self.pool.shutdown()
                self.pool = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def sampling(self, agent: str) -> Sampling:
        s = self.cfg.agent_train(agent)
        return Sampling(s.temperature, s.top_p, s.max_response_tokens)

    # -- one step ------------------------------------------------------------------------
    def train_step(self) -> dict:
        times, clock = {}, [time.perf_counter()]

        def lap(phase: str) -> None:
            now = time.perf_counter()
            times[phase], clock[0] = now - clock[0], now

        n = self.train.group_n
        drawn = self.sampler.next()
        uids = group_uids(drawn, self.step, per_slot=self.train.per_slot_uids)
        problems = [dict(p, uid=uid) for p, uid in zip(drawn, uids)]
        batch = [p for p in problems for _ in range(n)]
        episodes = run_mas(self.orchestra, batch, self.groups, self.agent_group, self.sampling,
                           derived_seed(self.seed, "rollout", self.step))
        lap("generate")
        team = score_episodes(episodes, self.reward)
        rows = self._upstream_rows(episode_rows(episodes, team, self.suite.invalid_penalty,
                                                self.agent_group))
        lap("reward")
        shaping = {"kl_ctrl": self.shaping.apply_kl(rows, self.groups)}
        if shaping["kl_ctrl"] is not None:
            lap("reference")
        cols = {k: [r[k] for r in rows] for k in ("uid", "traj_uid", "agent", "score")}
        cols["order"] = upstream_batch_order(rows, list(self.plan))
        adv = compute_advantages(np.asarray(cols["score"]), cols["uid"], cols["traj_uid"],
                                 cols["agent"], estimator=self.estimator,
                                 norm_by_std=self.train.norm_by_std, order=cols["order"])
        for row, a in zip(rows, adv.tolist()):
            row["advantage"] = a
        shaping["loss_balance"] = self.shaping.add_loss_weights(rows)
        lap("advantages")
        paired = None
        if self.train.paired_every and self.step % self.train.paired_every == 0:
            paired = self._paired(rows, cols)     # before the update: the same weights
            lap("paired")
        group_metrics = self._update(rows)
        lap("update")
        for grp in self.groups.values():
            grp.sync()
        lap("sync")
        times["total"] = sum(times.values())
        memory = {g: grp.stats() for g, grp in self.groups.items()}
        times["dispatch"] = sum(grp.pop_overhead() for grp in self.groups.values())
        self.step += 1
        m = self._metrics(episodes, team, rows, group_metrics, cols, times)
        m["memory"] = memory
        m.update({k: v for k, v in shaping.items() if v is not None})
        if paired is not None:
            m["paired"] = paired
        return m

    def _upstream_rows(self, rows: list[dict]) -> list[dict]:
        """The rollout rows as upstream's batch holds them before rewards are shaped and
        advantages computed, where upstream handles each worker group's rows (off by
        default): padded with copies (`train.pad_group_rows_to`; each group's own value, the
        copies drawn with a seed of the run, step and group) and balanced over the group's
        workers (`train.balance_batch`)."""
        multiples = {g: spec["settings"].pad_group_rows_to for g, spec in self.plan.items()}
        if any(multiples.values()):
            rows = pad_group_rows(rows, multiples, lambda g: np.random.RandomState(
                derived_seed(self.seed, "pad", self.step, g)))
        if self.train.balance_batch:
            rows = balance_group_rows(rows, {g: grp.world for g, grp in self.groups.items()})
        return rows

    def _paired(self, rows: list[dict], cols: dict) -> dict:
        """The paired same-batch measurement (`train.paired_every`; drmas/algos/paired.py):
        per agent, the squared norm of the policy-gradient term at ratio 1 on this batch's
        rows and the weights before the update, with GRPO's advantages (global mean and
        std), Dr. MAS's (the agent's own), the offset-only ones (mu_k - mu) / sigma, and those
        of every other prompt-group estimator the profile runs (`paired_estimators`), each
        row weighted by its `loss_weight` when there is one. {agent: {"grad_sq_grpo",
        "grad_sq_drmas", "grad_sq_offset", ["grad_sq_<estimator>", ...] "rows"}} for the
        agents with rows."""
        scores = np.asarray(cols["score"])
        ids = (cols["uid"], cols["traj_uid"], cols["agent"])
        norm = self.train.norm_by_std
        sets = {f"grad_sq_{name}": compute_advantages(scores, *ids, estimator=name,
                                                      norm_by_std=norm, order=cols["order"])
                for name in ("grpo", "drmas")}
        sets["grad_sq_offset"] = offset_advantages(scores, *ids, norm_by_std=norm)
        for name in paired_estimators(self.cfg):
            sets[f"grad_sq_{name}"] = compute_advantages(scores, *ids, estimator=name,
                                                         norm_by_std=norm, order=cols["order"])
        sets = {k: v.tolist() for k, v in sets.items()}
        keys = ("agent", "prompt_ids", "response_ids")
        keys += ("loss_weight",) if rows and "loss_weight" in rows[0] else ()
        out = {}
        for g, grp in self.groups.items():
            idx = [i for i, r in enumerate(rows) if r["group"] == g]
            mine = [{k: rows[i][k] for k in keys} for i in idx]
            out.update(grp.paired_grad_sq(mine, {k: [v[i] for i in idx] for k, v in sets.items()}))
        return {a: out[a] for a in self.suite.agents if a in out}

    def _update(self, rows: list[dict]) -> dict:
        """Each group updates on its own rows only; groups on disjoint slices of the pool
        update side by side, colocated ones take turns."""
        keys = ("agent", "prompt_ids", "response_ids", "logprobs", "advantage")
        keys += ("loss_weight",) if rows and "loss_weight" in rows[0] else ()
        mine = {g: [{k: r[k] for k in keys} for r in rows if r["group"] == g] for g in self.groups}
        seeds = {g: derived_seed(self.seed, "update", self.step, g) for g in self.groups}
        if self.pool is not None and not self.pool.colocated:
            handles = {g: grp.update_async(mine[g], seeds[g]) for g, grp in self.groups.items()}
            return {g: grp.wait(handles[g]) for g, grp in self.groups.items()}
        return {g: grp.update(mine[g], seeds[g]) for g, grp in self.groups.items()}

    def _metrics(self, episodes, team, rows, group_metrics, cols, timings) -> dict:
        """The step's metrics. With `train.pad_group_rows_to` the rollout's statistics (calls,
        rewards, validity, lengths, rows, rollout throughput) are over the rollout's rows,
        those of advantages, diagnostics and the update over the rows trained on, copies
        included (`padded_rows`: the copies per group)."""
        rollout = [r for r in rows if not r.get("copy")]
        agents = {}
        for agent in self.suite.agents:
            mine = [r for r in rollout if r["agent"] == agent]
            trained = [r for r in rows if r["agent"] == agent]
            g = group_metrics[self.agent_group[agent]]
            agents[agent] = {
                "calls": len(mine),
                "reward": _stats([r["score"] for r in mine]),
                "valid": float(np.mean([r["valid"] for r in mine])) if mine else 0.0,
                "advantage": {**_stats([r["advantage"] for r in trained]),
                              "absmax": max((abs(r["advantage"]) for r in trained), default=0.0)},
                "response_len": float(np.mean([len(r["response_ids"]) for r in mine])) if mine else 0.0,
                "grad_norm": g.get("agent_grad_norm", {}).get(agent),
                "clip_frac": g.get("agent_clip_frac", {}).get(agent),
                "approx_kl": g.get("agent_approx_kl", {}).get(agent),
            }
        for g in group_metrics.values():
            for key in ("agent_grad_norm", "agent_clip_frac", "agent_approx_kl"):
                g.pop(key, None)
        tokens = sum(len(r["response_ids"]) for r in rollout)
        trained_tokens = sum(len(r["response_ids"]) for r in rows)
        batch = (np.asarray(cols["score"]), cols["uid"], cols["traj_uid"], cols["agent"])
        # upstream's Lemma 4.2 names, then the same-batch prediction (ARCHITECTURE.md, Run folder)
        adv_diag = lemma_diagnostics(*batch)
        for agent, pred in lemma_prediction(*batch, norm_by_std=self.train.norm_by_std,
                                            order=cols["order"]).items():
            adv_diag.setdefault(agent, {}).update(pred)
        out = {"step": self.step, "team_reward": _stats(team),
               "reward_groups": reward_groups(episodes, team), "agents": agents,
               "groups": group_metrics, "adv_diag": adv_diag,
               "adv_std": pool_std_fractions(batch[0], cols["uid"], cols["agent"]),
               "episodes": {k: float(np.mean([ep.info.get(k, 0) for ep in episodes]))
                            for k in episodes[0].info} if episodes else {},
               "rows": len(rollout), "tokens_per_s": tokens / max(timings["generate"], 1e-9),
               "update_tokens_per_s": trained_tokens / max(timings["update"], 1e-9),
               "time": timings}
        if any(spec["settings"].pad_group_rows_to for spec in self.plan.values()):
            out["padded_rows"] = {g: sum(r["group"] == g for r in rows) - sum(
                r["group"] == g for r in rollout) for g in self.groups}
        return out

    # -- checkpoints ---------------------------------------------------------------------
    def save(self, path: Path, final: bool = False) -> None:
        state = {"step": self.step, "sampler": self.sampler.state(),
                 "groups": self.plan_summary(), "identity_hash": self.identity_hash}
        if (shaping := self.shaping.state(self.groups)) is not None:
            state["shaping"] = shaping               # beta and the reference digests
        checkpoint.save(path, self.groups, state,
                        with_optimizer=not final,
                        metrics=None if final else self.out / "metrics.jsonl")

    def plan_summary(self) -> dict:
        return {g: {"model": s["model"], "agents": s["agents"]} for g, s in self.plan.items()}

    def _same_run(self, where: Path, state: dict) -> bool:
        """Whether a checkpoint or final save was made by this very configuration; if not,
        say in one line which keys changed (when the save recorded them)."""
        if state.get("identity_hash") == self.identity_hash:
            return True
        old = _read_identity(self.out / "config.yaml") if where == self.out / "final" else None
        if old is None and (self.ckpt_root / "identity.json").exists():
            old = read_json(self.ckpt_root / "identity.json", what="run identity")
        changed = changed_keys(old, self.identity) if old else ["(unrecorded)"]
        _warn(f"{where} was made with another configuration "
              f"({', '.join(changed[:6])}{' ...' if len(changed) > 6 else ''}); starting afresh")
        return False

    def resume(self) -> bool:
        """Continue from the newest usable checkpoint of this very run, if any; True when
        resumed.

        Checkpoints are tried newest first; one that fails `checkpoint.verify` or fails to
        load is set aside (renamed `step<k>.unusable`) and the next older one is tried, with
        one line on stderr saying so. A checkpoint of another configuration (another run
        identity) is never resumed: all of them are discarded and the run starts afresh.
        When checkpoints of this run exist but none is usable the run stops (DrmasError
        naming the folder) rather than start over: starting afresh would silently spend again
        the compute the checkpoints stood for, while the damage may be recoverable (a disk or
        copy problem); the user decides, by moving the folder away.
        """
        skipped: list[tuple[Path, str]] = []
        for ckpt in reversed(checkpoint.complete(self.ckpt_root)):
            problem = checkpoint.verify(ckpt)
            if problem is None:
                state = checkpoint.read_state(ckpt)
                if not self._same_run(ckpt, state):
                    shutil.rmtree(self.ckpt_root, ignore_errors=True)
                    return False
                if state.get("groups") != self.plan_summary():
                    raise ConfigError(f"{ckpt} holds groups {state.get('groups')}, this run has "
                                      f"{self.plan_summary()}; delete {self.ckpt_root} to start over")
                problem = self._load(ckpt, state)
            if problem is None:
                if skipped:
                    aside = [checkpoint.set_aside(bad).name for bad, _ in skipped]
                    _warn(f"checkpoint {_listing(skipped)} unusable, set aside as "
                          f"{', '.join(aside)}; resuming from {ckpt} (step {self.step})")
                if (ckpt / "metrics.jsonl").exists():    # the run folder may have been removed
                    with atomic_path(self.out / "metrics.jsonl") as tmp:
                        shutil.copyfile(ckpt / "metrics.jsonl", tmp)
                checkpoint.truncate_metrics(self.out / "metrics.jsonl", self.step)
                return True
            skipped.append((ckpt, problem))
        if skipped:
            raise DrmasError(f"{self.ckpt_root}: no usable checkpoint ({_listing(skipped)}); "
                             f"move {self.ckpt_root} away to start afresh")
        return False

    def _load(self, ckpt: Path, state: dict) -> str | None:
        """Load every group, the driver's RNG and the sampler from `ckpt`; None when done,
        else what failed (a later, successful load overwrites whatever this one set)."""
        try:
            for g, grp in self.groups.items():
                grp.load(ckpt / g)
            checkpoint.restore_driver_rng(ckpt)
            self.shaping.load_state(state.get("shaping"), self.groups)
        except Exception as exc:    # a torn file that verify could not see (old checkpoints)
            lines = [l for l in str(exc).splitlines() if l.strip()] or [type(exc).__name__]
            return f"cannot be loaded ({lines[-1].strip()[:200]})"
        self.step = state["step"]
        self.sampler = ProblemSampler(self.sampler.problems, self.sampler.batch, self.seed,
                                      epoch=state["sampler"]["epoch"], pos=state["sampler"]["pos"])
        return None

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> dict:
        """Train to `train.steps` (resuming from a checkpoint if there is one), save `final/`,
        write `summary.json`; the groups (and Ray) are shut down on the way out. A worker lost
        with its Ray node ends the run with one line saying where a rerun resumes (the run
        cannot go on without the lost rank's state; the rerun, once the cluster is whole,
        continues exactly where the checkpoint left off)."""
        try:
            return self._run()
        except WorkerLostError as exc:
            raise WorkerLostError(f"{exc}; {self._rerun_start()}") from exc
        finally:
            self.close()

    def _rerun_start(self) -> str:
        """Where a rerun of this run starts: its newest complete checkpoint (any backend
        resumes it: `resources` is not part of the run identity)."""
        last = checkpoint.latest(self.ckpt_root)
        if last is None:
            return "no checkpoint yet: a rerun starts from step 0"
        step = checkpoint.read_state(last)["step"]
        return f"a rerun resumes from the last checkpoint, step {step}"

    def _run(self) -> dict:
        self.out.mkdir(parents=True, exist_ok=True)
        steps = self.total_steps()
        metrics = self.out / "metrics.jsonl"
        final = self.out / "final"
        if (final / checkpoint.STATE).exists():
            if problem := checkpoint.verify(final):
                _warn(f"{final} is unusable ({problem}); it will be written again")
            elif not self._same_run(final, checkpoint.read_state(final)):
                shutil.rmtree(final)
        self._write_run_config()
        if checkpoint.finished(self.out, steps):     # crashed after the final save
            self.step = steps
            checkpoint.truncate_metrics(metrics, steps)
            resumed_from = steps
        elif self.resume():
            resumed_from = self.step
        else:
            resumed_from = None
            metrics.unlink(missing_ok=True)
        self.ckpt_root.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.ckpt_root / "identity.json", json.dumps(self.identity, indent=1))
        board = _board(self.out / "tensorboard", self.step, metrics, self.cfg.tracking,
                       f"{self.suite.name}/{self.assignment}/{self.method}/seed{self.seed}",
                       self.cfg.resolved())
        bar = self.bar                       # from the start of this run's main loop
        bar.reset(total=steps)
        bar.initial = bar.n = self.step          # resumed steps do not count in the rate
        bar.set_postfix_str("", refresh=True)
        with open(metrics, "a") as log:
            while self.step < steps:
                m = self.train_step()
                log.write(json.dumps(m) + "\n")
                log.flush()
                _scalars(board, m)
                bar.set_postfix(step=self.step, reward=f"{m['team_reward']['mean']:.3f}",
                                refresh=False)
                bar.update(1)           # redraws with the postfix just set
                if self.step % self.train.save_every == 0 and self.step < steps:
                    self.save(checkpoint.step_dir(self.ckpt_root, self.step))
                    checkpoint.prune(self.ckpt_root)
        bar.close()
        board.close()
        if not checkpoint.finished(self.out, steps):
            self.save(self.out / "final", final=True)
        summary = {"steps": self.step, "identity_hash": self.identity_hash,
                   "groups": self.plan_summary(),
                   "workers": {g: grp.describe() for g, grp in self.groups.items()},
                   "backend": self.cfg.resources.backend, "resumed_from": resumed_from,
                   "startup": self.startup}
        atomic_write_text(self.out / "summary.json", json.dumps(summary, indent=1))
        return summary


    def _write_run_config(self) -> None:
        """`config.yaml` of the run: the resolved config it ran with, and its identity."""
        atomic_write_text(self.out / "config.yaml", yaml.safe_dump(
            {"config": self.cfg.resolved(), "suite": self.suite.name,
             "assignment": self.assignment, "method": self.method, "seed": self.seed,
             "groups": self.plan_summary(), "identity_hash": self.identity_hash,
             "identity": self.identity}, sort_keys=False))


def _check_balance(cfg: Config, plan: dict) -> None:
    """`train.balance_batch` deals a group's rows to its workers in equal shares, so with W > 1
    workers per group (the ray backend) every group's rows must be padded to a multiple of W
    (upstream's divisor is one: its micro-batch sizes times the GPU count). Refused up front,
    before any worker starts, rather than at the first step whose row count does not divide."""
    world = cfg.resources.workers_per_group if cfg.resources.backend == "ray" else 1
    if not cfg.train.balance_batch or world == 1:
        return
    for g, spec in plan.items():
        multiple = spec["settings"].pad_group_rows_to
        if multiple == 0 or multiple % world:
            raise ConfigError(f"train.balance_batch with resources.workers_per_group {world} "
                              f"needs train.pad_group_rows_to a multiple of {world} for group "
                              f"{g!r} (agents {', '.join(spec['agents'])}), got {multiple}")


def _read_identity(path: Path) -> dict | None:
    try:
        return yaml.safe_load(path.read_text()).get("identity")
    except (OSError, AttributeError, yaml.YAMLError):
        return None


def _warn(message: str) -> None:
    """One line on stderr (beside tqdm's bar and the job's log), never a traceback."""
    print(f"drmas train: {' '.join(message.split())}", file=sys.stderr, flush=True)


def _listing(skipped: list[tuple[Path, str]]) -> str:
    return ", ".join(f"{p.name} ({why})" for p, why in skipped)


def _board(path: Path, step: int, metrics: Path, tracking=("tensorboard",), name: str = "",
           config: dict | None = None):
    """The trackers of the profile's `tracking:` (TensorBoard's writer in `path`, W&B, MLflow:
    drmas/train/tracking.py) beside metrics.jsonl. After a resume they are rebuilt from the
    restored metrics (the run folder may have been removed since)."""
    from drmas.train.tracking import Trackers

    board = Trackers(tracking, path.parent, name, config)
    if step and metrics.exists():
        for line in metrics.read_text().splitlines():
            _scalars(board, json.loads(line))
    return board


def _flatten(m: dict, prefix: str = ""):
    for key, value in m.items():
        if isinstance(value, dict):
            yield from _flatten(value, f"{prefix}{key}/")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            yield prefix + key, value


def _scalars(board, m: dict) -> None:
    """Every number of a metrics line, under its key path (agents/solver/reward/mean, ...)."""
    for tag, value in _flatten(m):
        if tag != "step":
            board.add_scalar(tag, value, m["step"])
    board.flush()
