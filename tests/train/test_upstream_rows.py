"""Upstream's handling of each worker group's rows before advantages, as the trainer does it
(drmas/train/trainer.py: `pad_group_rows`, `balance_group_rows`, `Trainer._upstream_rows`):
`train.pad_group_rows_to` (upstream's `adjust_batch(mode="copy")`) and `train.balance_batch`
(verl's `balance_batch`), both off by default.

Upstream's step (verl/trainer/ppo/ray_trainer.py:1229-1248 of langfengQ/DrMAS at 19c632b,
1171-1188 at 3b556f2) splits the batch by worker group (`split_batch_by_wg_ids`: each group's
rows in batch order), pads and balances each group's part, and concatenates the parts in
group order (`combine_batches`); rewards, KL and advantages come after, on that batch. The
pipeline below is a transcription of that order around drmas's pieces, which
tests/algos/test_batching.py compares with upstream's `adjust_batch` and verl's partition
function."""

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import make_config, math_suite
from drmas.algos.advantages import compute_advantages
from drmas.algos.batching import balanced_partitions, copy_indices
from drmas.config.groups import plan_groups
from drmas.config.stages import train_key
from drmas.errors import ConfigError
from drmas.train.trainer import (VOLATILE, Trainer, _check_balance, balance_group_rows,
                                 pad_group_rows, upstream_batch_order)
from training import make_trainer

GROUPS = ["solver", "verifier", "critic"]


def random_rows(rng, n):
    """Rollout rows of three worker groups, interleaved as a rollout gathers them."""
    return [{"row": i, "group": str(rng.choice(GROUPS)), "uid": f"u{rng.integers(4)}",
             "traj_uid": int(rng.integers(8)), "agent": str(rng.choice(["a", "b"])),
             "score": float(rng.random()), "prompt_ids": [0] * int(rng.integers(1, 50)),
             "response_ids": [1] * int(rng.integers(1, 400))} for i in range(n)]


def seeded(seed):
    return lambda g: np.random.RandomState(seed + GROUPS.index(g))


def upstream_batch(rows, multiples, seed, worlds):
    """The `row` ids of upstream's combined batch: per group (split_batch_by_wg_ids) its rows
    with their copies appended (adjust_batch: `copy_indices` on a generator seeded as the
    trainer's), then reordered to the concatenated partitions (_balance_batch), groups
    concatenated in order (combine_batches)."""
    out = []
    for g in GROUPS:
        part = [r for r in rows if r["group"] == g]
        if not part:
            continue
        part = part + [part[i] for i in copy_indices(len(part), multiples.get(g, 0),
                                                     seeded(seed)(g))]
        if worlds.get(g, 1) > 1:
            lengths = [len(r["prompt_ids"]) + len(r["response_ids"]) for r in part]
            part = [part[j] for p in balanced_partitions(lengths, worlds[g]) for j in p]
        out += [r["row"] for r in part]
    return out


@pytest.mark.parametrize("trial", range(20))
def test_padded_and_balanced_rows_are_upstreams_batch(trial):
    rng = np.random.default_rng(trial)
    rows = random_rows(rng, int(rng.integers(1, 200)))
    multiples = {"solver": 32, "verifier": 128, "critic": int(rng.choice([0, 4, 8]))}
    worlds = {g: int(rng.choice([1, 2, 4])) for g in GROUPS}
    worlds["critic"] = 1 if multiples["critic"] == 0 else worlds["critic"]
    padded = pad_group_rows(rows, multiples, seeded(trial))
    assert padded[:len(rows)] == rows and all(r["copy"] for r in padded[len(rows):])
    balanced = balance_group_rows(padded, worlds)
    order = upstream_batch_order(balanced, GROUPS)
    assert [balanced[i]["row"] for i in order] == upstream_batch(rows, multiples, trial, worlds)
    for g, multiple in multiples.items():
        count = sum(r["group"] == g for r in balanced)
        assert count % multiple == 0 if multiple and count else True


def test_a_copy_is_its_row_in_every_pool():
    """A copy carries its row's uid, trajectory, agent and score: every estimator gives it the
    row's advantage, and the pools count it: the rows' advantages change, except under
    grpo_2025 without balancing, whose pools hold trajectories' first rows, which copies
    appended after their group's rows never are."""
    rng = np.random.default_rng(5)
    rows = random_rows(rng, 40)
    padded = pad_group_rows(rows, {"solver": 32}, seeded(0))
    copies = padded[len(rows):]
    assert copies and all(r["group"] == "solver" for r in copies)
    cols = [[r[k] for r in padded] for k in ("score", "uid", "traj_uid", "agent")]
    for est in ("grpo", "drmas", "grpo_2025"):
        adv = compute_advantages(*cols, estimator=est,
                                 order=upstream_batch_order(padded, GROUPS)).tolist()
        by_row = {}
        for r, a in zip(padded, adv):
            assert by_row.setdefault(r["row"], a) == a, est
        before = compute_advantages(*[c[:len(rows)] for c in cols], estimator=est,
                                    order=upstream_batch_order(rows, GROUPS)).tolist()
        assert (adv[:len(rows)] == before) == (est == "grpo_2025"), est


def test_off_the_rows_are_untouched_and_no_random_number_is_drawn():
    rows = random_rows(np.random.default_rng(1), 30)
    state = np.random.get_state()[1].copy()
    assert pad_group_rows(rows, {g: 0 for g in GROUPS}, seeded(0)) == rows
    assert balance_group_rows(rows, {g: 1 for g in GROUPS}) == rows
    trainer = SimpleNamespace(plan={g: {"settings": SimpleNamespace(pad_group_rows_to=0)}
                                    for g in GROUPS},
                              train=SimpleNamespace(balance_batch=False), seed=0, step=0)
    out = Trainer._upstream_rows(trainer, rows)
    assert out is rows and all(a is b for a, b in zip(out, rows))
    np.testing.assert_array_equal(np.random.get_state()[1], state)


def test_default_keys_leave_run_identities_alone(tiny_model_dir):
    """Off, the new keys are not part of a run's key: existing runs keep their identity."""
    suite = math_suite()
    key = train_key(make_config(tiny_model_dir), suite, "shared", "grpo", 0)
    assert not {"pad_group_rows_to", "balance_batch"} & set(key["train"]["solver"])
    assert "workers_per_group" not in key
    on = train_key(make_config(tiny_model_dir, pad_group_rows_to=32, balance_batch=True),
                   suite, "shared", "grpo", 0)
    assert on["train"]["solver"]["pad_group_rows_to"] == 32
    assert on["train"]["verifier"]["balance_batch"] is True and on["workers_per_group"] == 1


def test_balancing_several_workers_needs_rows_padded_to_a_multiple_of_them(tiny_model_dir):
    suite = math_suite()

    def check(workers, **train):
        cfg = make_config(tiny_model_dir, balance_batch=True, **train)
        cfg = replace(cfg, resources=replace(cfg.resources, backend="ray",
                                             workers_per_group=workers))
        _check_balance(cfg, plan_groups(cfg, "nonshared", suite.agents))

    check(1)
    check(4, pad_group_rows_to=32)
    for pad in (0, 6):
        with pytest.raises(ConfigError, match=r"train.balance_batch with resources.workers_per_group "
                                              rf"4 needs train.pad_group_rows_to a multiple of 4 "
                                              rf"for group 'solver' \(agents solver\), got {pad}$"):
            check(4, pad_group_rows_to=pad)


def test_a_padded_step_trains_on_the_copies(tiny_model_dir, math_rows, tmp_path):
    """Each group's rows reach its update padded to a multiple of 12, copies included, with
    the advantages of the padded batch; the rollout's statistics count the rollout's rows."""
    cfg = make_config(tiny_model_dir, pad_group_rows_to=12)
    trainer = make_trainer(cfg, [r for r in math_rows if r["split"] == "train"], tmp_path,
                           "nonshared", "drmas")
    seen, update = [], trainer._update
    trainer._update = lambda rows: seen.extend(rows) or update(rows)
    m = trainer.train_step()
    rollout = [r for r in seen if not r.get("copy")]
    for g in trainer.groups:
        count = sum(r["group"] == g for r in seen)
        assert count % 12 == 0
        assert m["padded_rows"][g] == count - sum(r["group"] == g for r in rollout)
        assert m["groups"][g].get("rows", 0) == count
    assert m["rows"] == len(rollout) < len(seen)
    assert sum(a["calls"] for a in m["agents"].values()) == len(rollout)
    cols = [[r[k] for r in seen] for k in ("score", "uid", "traj_uid", "agent")]
    want = compute_advantages(*cols, estimator="drmas")
    assert [r["advantage"] for r in seen] == want.tolist()


def test_balancing_one_worker_changes_nothing(tiny_model_dir, math_rows, tmp_path):
    """With one worker per group (the local backend) balance_batch keeps the rows' order: the
    step is the same, metric for metric."""
    train = [r for r in math_rows if r["split"] == "train"]
    steps = []
    for on in (False, True):
        trainer = make_trainer(make_config(tiny_model_dir, balance_batch=on), train,
                               tmp_path / str(on), "nonshared", "grpo_2025")
        m = trainer.train_step()
        steps.append({k: v for k, v in m.items() if k not in VOLATILE})
    assert steps[0] == steps[1]


def test_on_the_copies_depend_on_run_step_and_group_and_the_workers_deal_them():
    """The trainer pads with a generator seeded by (run seed, step, group), so a rerun or a
    resumed run draws the same copies, and balances over each group's worker count."""
    from drmas.rollout.mas import derived_seed

    rows = random_rows(np.random.default_rng(2), 90)

    def upstream_rows(seed, step, worlds):
        trainer = SimpleNamespace(
            plan={g: {"settings": SimpleNamespace(pad_group_rows_to=32)} for g in GROUPS},
            train=SimpleNamespace(balance_batch=True), seed=seed, step=step,
            groups={g: SimpleNamespace(world=w) for g, w in worlds.items()})
        return [r["row"] for r in Trainer._upstream_rows(trainer, rows)]

    worlds = {"solver": 2, "verifier": 4, "critic": 1}
    got = upstream_rows(3, 5, worlds)
    assert got == upstream_rows(3, 5, worlds) != upstream_rows(3, 6, worlds)
    padded = pad_group_rows(rows, {g: 32 for g in GROUPS},
                            lambda g: np.random.RandomState(derived_seed(3, "pad", 5, g)))
    assert got == [r["row"] for r in balance_group_rows(padded, worlds)]
    assert got != [r["row"] for r in padded]
