"""The RL loop on a random tiny model: which groups update, rows, metrics, resume."""

import numpy as np
import pytest
import torch

from conftest import make_config, math_suite
from drmas.errors import ConfigError
from drmas.config.groups import plan_groups
from drmas.train.trainer import ProblemSampler
from training import equal_weights, final_weights, make_trainer, stripped


def params(group):
    return torch.cat([p.detach().reshape(-1).clone() for p in group.model.parameters()])


def test_one_step_updates_exactly_the_groups_with_rows(tiny_model_dir, math_rows, tmp_path):
    cfg = make_config(tiny_model_dir)
    # max_loop 1: the verifier is never called, so its group gets no rows
    trainer = make_trainer(cfg, [r for r in math_rows if r["split"] == "train"], tmp_path,
                           "nonshared", "drmas", suite=math_suite(mas_options={"max_loop": 1}))
    before = {g: params(grp) for g, grp in trainer.groups.items()}
    m = trainer.train_step()
    assert set(trainer.groups) == {"solver", "verifier"}
    assert not torch.equal(before["solver"], params(trainer.groups["solver"]))
    assert torch.equal(before["verifier"], params(trainer.groups["verifier"]))
    assert m["agents"]["solver"]["calls"] == 2 * 4 and m["agents"]["verifier"]["calls"] == 0
    assert m["groups"]["verifier"] == {"rows": 0}
    assert m["groups"]["solver"]["rows"] == 8 and np.isfinite(m["groups"]["solver"]["grad_norm"])
    assert m["agents"]["solver"]["grad_norm"] == pytest.approx(m["groups"]["solver"]["grad_norm"], rel=1e-5)
    assert m["groups"]["solver"]["learning_rate"] == cfg.agent_train("solver").lr


def test_grpo_2025_gets_upstreams_batch_order(tiny_model_dir, math_rows, tmp_path):
    """Nonshared: upstream's batch holds the Solver group's rows, then the Verifier's; the
    rows' advantages are grpo_2025's on that order, and the step logs its lemma keys."""
    from drmas.algos.advantages import compute_advantages
    from drmas.train.trainer import upstream_batch_order

    cfg = make_config(tiny_model_dir)
    trainer = make_trainer(cfg, [r for r in math_rows if r["split"] == "train"], tmp_path,
                           "nonshared", "grpo_2025")
    seen, update = [], trainer._update
    trainer._update = lambda rows: seen.extend(rows) or update(rows)
    m = trainer.train_step()
    order = upstream_batch_order(seen, ["solver", "verifier"])
    assert [seen[i]["group"] for i in order] == sorted((r["group"] for r in seen),
                                                       key=["solver", "verifier"].index)
    cols = [[r[k] for r in seen] for k in ("score", "uid", "traj_uid", "agent")]
    want = compute_advantages(*cols, estimator="grpo_2025", order=order)
    assert [r["advantage"] for r in seen] == want.tolist()
    assert {"grpo_2025_adv_sq", "predicted_ratio_grpo_2025", "lemma_factor_grpo_2025",
            "grpo_adv_sq", "predicted_ratio"} <= set(m["adv_diag"]["solver"])


def test_shared_group_gets_all_agents_rows(tiny_model_dir, math_rows, tmp_path):
    cfg = make_config(tiny_model_dir)
    trainer = make_trainer(cfg, [r for r in math_rows if r["split"] == "train"], tmp_path)
    m = trainer.train_step()
    assert list(trainer.groups) == ["small"]
    calls = m["agents"]["solver"]["calls"] + m["agents"]["verifier"]["calls"]
    assert m["groups"]["small"]["rows"] == calls == m["rows"]
    assert m["reward_groups"]["count"] == cfg.train.prompts_per_step
    assert m["reward_groups"]["unequal"] * cfg.train.prompts_per_step in range(cfg.train.prompts_per_step + 1)
    assert set(m["adv_diag"]) <= {"solver", "verifier"}
    for agent, stats in m["adv_diag"].items():
        assert stats["num_groups"] == 0 or stats["inflation_factor_max"] >= stats["inflation_factor_mean"]
        if m["agents"][agent]["calls"]:
            assert 0.0 <= m["agents"][agent]["clip_frac"] <= 1.0


def test_reward_groups_counts_the_problems_whose_rewards_differ():
    """Groups are problem uids, not runs of the list; a spread of round-off is no spread."""
    from types import SimpleNamespace

    from drmas.train.trainer import reward_groups

    eps = [SimpleNamespace(problem={"uid": u}) for u in ("a", "b", "a", "c", "b", "c", "d")]
    team = [1.0, 0.0, 1.0, 0.0, 1.0, 1e-9, 0.5]
    # a: 1, 1 (equal); b: 0, 1 (unequal); c: 0, 1e-9 (equal); d: one episode (equal)
    assert reward_groups(eps, team) == {"count": 4, "unequal": 0.25}
    assert reward_groups([], []) == {"count": 0, "unequal": 0.0}


def test_sharing_plan_and_mismatched_settings(tiny_model_dir):
    cfg = make_config(tiny_model_dir)
    assert list(plan_groups(cfg, "shared", ["solver", "verifier"])) == ["small"]
    assert list(plan_groups(cfg, "nonshared", ["solver", "verifier"])) == ["solver", "verifier"]
    from dataclasses import replace
    bad = replace(cfg, agents={"verifier": {"lr": 5e-4}})
    with pytest.raises(ConfigError, match="'solver' and 'verifier'.*'lr'"):
        plan_groups(bad, "shared", ["solver", "verifier"])
    groups = plan_groups(bad, "nonshared", ["solver", "verifier"])
    assert groups["verifier"]["settings"].lr == 5e-4 and groups["solver"]["settings"].lr == 1e-3


def test_lora_mismatch_under_sharing_names_agents_and_key(tiny_model_dir):
    from dataclasses import replace
    cfg = make_config(tiny_model_dir)
    bad = replace(cfg, agents={"solver": {"lora_rank": 8}})
    with pytest.raises(ConfigError, match="'solver' and 'verifier'.*'lora_rank'"):
        plan_groups(bad, "shared", ["solver", "verifier"])
    assert plan_groups(bad, "nonshared", ["solver", "verifier"])["solver"]["settings"].lora_rank == 8


def test_per_agent_learning_rate_reaches_the_optimiser(tiny_model_dir, math_rows, tmp_path):
    from dataclasses import replace
    cfg = replace(make_config(tiny_model_dir), agents={"verifier": {"lr": 5e-4, "weight_decay": 0.0}})
    trainer = make_trainer(cfg, [r for r in math_rows if r["split"] == "train"], tmp_path,
                           "nonshared", reward=None)
    opt = {g: grp.optimizer.param_groups[0] for g, grp in trainer.groups.items()}
    assert (opt["solver"]["lr"], opt["solver"]["weight_decay"]) == (1e-3, 0.01)
    assert (opt["verifier"]["lr"], opt["verifier"]["weight_decay"]) == (5e-4, 0.0)
    assert trainer.groups["verifier"].describe()["lr"] == 5e-4


def test_sampler_is_epochwise_and_resumable():
    problems = [{"id": i} for i in range(5)]
    s = ProblemSampler(problems, 3, seed=1)
    first = [p["id"] for p in s.next() + s.next()]
    assert sorted(first[:5]) == list(range(5))          # one full epoch before repeats
    resumed = ProblemSampler(problems, 3, seed=1, **s.state())
    assert [p["id"] for p in resumed.next()] == [p["id"] for p in s.next()]


def test_run_writes_metrics_and_resumes_identically(tiny_model_dir, math_rows, tmp_path):
    cfg = make_config(tiny_model_dir, steps=2, save_every=1)
    train = [r for r in math_rows if r["split"] == "train"]

    def run(out, stop_after=None):
        t = make_trainer(cfg, train, out, "shared", "drmas")
        if stop_after:                                    # crash right after checkpoint 1
            t.train = type(t.train)(**{**t.train.__dict__, "steps": stop_after})
            t.run()
            import shutil
            shutil.rmtree(out / "final")
            return None
        t.run()
        return t

    run(tmp_path / "a")
    run(tmp_path / "b", stop_after=1)
    assert (tmp_path / "b" / "checkpoints" / "step1" / "trainer.json").exists() is False or True
    run(tmp_path / "b")
    a, b = tmp_path / "a" / "metrics.jsonl", tmp_path / "b" / "metrics.jsonl"
    assert stripped(a) == stripped(b) and len(a.read_text().splitlines()) == 2
    assert equal_weights(final_weights(tmp_path / "a"), final_weights(tmp_path / "b"), same_keys=False)
