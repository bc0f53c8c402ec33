"""KL penalty in the reward against a frozen reference model: verl's adaptive controller on a
hand-computed sequence, shaped scores against a plain loop, the reference model, a real run
(scores move by exactly beta x KL, beta follows the controller), checkpoint and resume."""

import json
import shutil

import numpy as np
import pytest
import torch

from conftest import make_config
from drmas.algos.advantages import compute_advantages
from drmas.algos.kl import AdaptiveKLController, kl_in_reward, row_kl
from drmas.config.profile import TrainConfig
from drmas.errors import DrmasError
from drmas.models.tiny import load_model
from drmas.train import checkpoint
from drmas.train.logprobs import pack, response_logprobs
from drmas.train.workers import LocalGroup
from rows import AGENTS, engine_rows, solver_rows
from training import make_trainer, stripped, two_worker_group


def test_adaptive_controller_on_a_hand_computed_sequence():
    ctrl = AdaptiveKLController(0.001, target=0.1, horizon=10000)
    # kl 0.05: error 0.05/0.1 - 1 = -0.5, clipped to -0.2; x 100 rows / 10000 -> x 0.998
    ctrl.update(0.05, 100)
    assert ctrl.value == pytest.approx(0.000998, rel=1e-12)
    # kl 0.11: error +0.1 (inside the clip); 50 rows -> x 1.0005
    ctrl.update(0.11, 50)
    assert ctrl.value == pytest.approx(0.000998 * 1.0005, rel=1e-12)
    # kl 1.0: error 9 clipped to +0.2; a full horizon of rows -> x 1.2
    ctrl.update(1.0, 10000)
    assert ctrl.value == pytest.approx(0.000998 * 1.0005 * 1.2, rel=1e-12)
    # on target: unchanged
    before = ctrl.value
    ctrl.update(0.1, 5000)
    assert ctrl.value == before
    with pytest.raises(ValueError, match="horizon"):
        AdaptiveKLController(0.001, 0.1, 0)
    assert AdaptiveKLController.of(TrainConfig()) == AdaptiveKLController(0.001, 0.1, 10000)


def test_shaped_scores_match_a_plain_loop():
    rng = np.random.default_rng(0)
    lengths = [3, 0, 7, 1, 5]
    lp = [list(rng.normal(-1, 0.5, n)) for n in lengths]
    ref = [list(np.asarray(x) + rng.normal(0, 0.2, len(x))) for x in lp]
    scores = [1.0, 0.0, -0.1, 1.0, 0.9]
    ctrl = AdaptiveKLController(0.5, target=0.01, horizon=20)
    shaped, sums, m = kl_in_reward(scores, lp, ref, ctrl)

    want_sums, want_means = [], []
    for a, b in zip(lp, ref):
        total = 0.0
        for x, y in zip(a, b):
            total += x - y
        want_sums.append(total)
        want_means.append(total / len(a) if a else 0.0)
    np.testing.assert_allclose(sums, want_sums, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(shaped, [s - 0.5 * k for s, k in zip(scores, want_sums)], rtol=1e-12)
    mean_kl = sum(want_means) / len(want_means)
    assert m["beta"] == 0.5 and m["mean_kl"] == pytest.approx(mean_kl, rel=1e-12)
    assert m["penalty"] == pytest.approx(0.5 * sum(want_sums) / 5, rel=1e-12)
    error = min(max(mean_kl / 0.01 - 1, -0.2), 0.2)
    assert ctrl.value == pytest.approx(0.5 * (1 + error * 5 / 20), rel=1e-12)   # updated after
    with pytest.raises(ValueError, match="row 0: 2 behaviour logprobs, 1 reference"):
        row_kl([[0.1, 0.2]], [[0.1]])


KL = dict(kl_in_reward=True, kl_coef=0.5, kl_target=0.01, kl_horizon=100)


def plain_reference(model_dir, rows, temperature=1.0):
    """Each row's reference logprobs from the base model freshly loaded, one row at a time."""
    model = load_model(model_dir).eval()
    out = []
    with torch.no_grad():
        for r in rows:
            ids, attn, resp = pack([r["prompt_ids"]], [r["response_ids"]], 0)
            lp, _ = response_logprobs(model, ids, attn, temperature)
            out.append(lp[0][resp[0] > 0].tolist())
    return out


def test_reference_is_the_frozen_base_model(tiny_model_dir):
    settings = TrainConfig(micro_batch_rows=2, grad_clip=1e9, loss_aggregation="verl",
                           log_ratio_clamp=None, lr=1e-2, temperature=0.7, **KL)
    group = LocalGroup("g", tiny_model_dir, ["solver"], settings)
    rows = solver_rows(group)
    before = group.ref_logprobs(rows)
    want = plain_reference(tiny_model_dir, rows, temperature=0.7)
    for got, w in zip(before, want):
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)
    digest = group.reference_digest()
    group.update(rows, seed=0)                             # the policy moves, the reference not
    assert group.ref_logprobs(rows) == before and group.reference_digest() == digest
    policy = response_logprobs(group.model, *pack([rows[0]["prompt_ids"]], [rows[0]["response_ids"]],
                                                  group.tokenizer.pad_token_id)[:2], 0.7)[0]
    assert not np.allclose(policy[0][-len(before[0]):].detach().numpy(), before[0], atol=1e-4)
    # off (the default): no reference model is built
    plain = LocalGroup("g", tiny_model_dir, ["solver"], TrainConfig())
    assert plain.reference is None and plain.reference_digest() is None


def test_run_shapes_scores_by_exactly_beta_times_kl(tiny_model_dir, math_rows, tmp_path):
    train = [r for r in math_rows if r["split"] == "train"]
    trainer = make_trainer(make_config(tiny_model_dir, **KL), train, tmp_path)
    captured = []
    apply = trainer.shaping.apply_kl

    def record(rows, groups):
        before = [r["score"] for r in rows]
        m = apply(rows, groups)
        captured.append((before, rows, m))
        return m
    trainer.shaping.apply_kl = record
    steps = [trainer.train_step(), trainer.train_step()]
    trainer.close()

    for (before, rows, m), metrics in zip(captured, steps):
        beta = m["beta"]
        kl = [r["kl"] for r in rows]
        assert [r["score"] for r in rows] == [b - beta * k for b, k in zip(before, kl)]   # exactly
        ref = plain_reference(tiny_model_dir, rows)
        want = [float(np.sum(np.asarray(r["logprobs"]) - np.asarray(x))) for r, x in zip(rows, ref)]
        np.testing.assert_allclose(kl, want, rtol=1e-4, atol=1e-4)
        assert metrics["kl_ctrl"]["beta"] == beta
        # the advantages were computed from the shaped scores
        adv = compute_advantages(np.asarray([r["score"] for r in rows]), [r["uid"] for r in rows],
                                 [r["traj_uid"] for r in rows], [r["agent"] for r in rows])
        np.testing.assert_allclose([r["advantage"] for r in rows], adv.numpy(), rtol=1e-6)
    # step 1: the policy is the reference (only engine-vs-trainer float noise); after one
    # update it has moved and the penalty is real
    assert abs(captured[0][2]["mean_kl"]) < 1e-4 < abs(captured[1][2]["mean_kl"])
    assert any(b != r["score"] for b, r in zip(captured[1][0], captured[1][1]))
    # beta follows verl's rule: step 2 applies step 1's update (its mean KL, its row count)
    m1 = captured[0][2]
    error = float(np.clip(m1["mean_kl"] / 0.01 - 1, -0.2, 0.2))
    assert captured[1][2]["beta"] == pytest.approx(0.5 * (1 + error * len(captured[0][1]) / 100), rel=1e-12)
    assert set(steps[1]["kl_ctrl"]["agents"]) == {"solver", "verifier"}
    assert "reference" in steps[1]["time"]


def crash_after_one_step(cfg, train, out):
    """Train one step, checkpoint it as the run loop would, and stop (a crash)."""
    t = make_trainer(cfg, train, out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.jsonl").write_text(json.dumps(t.train_step()) + "\n")
    t.save(checkpoint.step_dir(t.ckpt_root, 1))
    t.close()
    return t


def test_beta_and_reference_survive_checkpoint_and_resume(tiny_model_dir, math_rows, tmp_path):
    cfg = make_config(tiny_model_dir, steps=3, save_every=10, **KL)
    train = [r for r in math_rows if r["split"] == "train"]
    straight = make_trainer(cfg, train, tmp_path / "a")
    straight.run()
    first = crash_after_one_step(cfg, train, tmp_path / "b")
    state = checkpoint.read_state(tmp_path / "b" / "checkpoints" / "step1")
    assert state["shaping"]["kl_beta"] != 0.5                       # beta moved in step 1
    assert state["shaping"]["reference"] == {"small": first.groups["small"].reference_digest()}
    resumed = make_trainer(cfg, train, tmp_path / "b")
    assert resumed.run()["resumed_from"] == 1
    a, b = stripped(tmp_path / "a" / "metrics.jsonl"), stripped(tmp_path / "b" / "metrics.jsonl")
    assert len(a) == 3 and a == b
    assert [m["kl_ctrl"]["beta"] for m in a][1] == state["shaping"]["kl_beta"]


def test_resume_refuses_a_changed_reference_model(tiny_model_dir, math_rows, tmp_path):
    """A pretrained base model replaced at the same path keeps the run identity (the path),
    but the reference the checkpoint's KL was measured against is gone: no silent resume."""
    model_dir = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model_dir)
    cfg = make_config(model_dir, steps=3, **KL)
    train = [r for r in math_rows if r["split"] == "train"]
    crash_after_one_step(cfg, train, tmp_path / "run")
    from safetensors.torch import load_file, save_file
    weights = load_file(str(model_dir / "model.safetensors"))
    save_file({k: v + 0.01 for k, v in weights.items()}, str(model_dir / "model.safetensors"))
    trainer = make_trainer(cfg, train, tmp_path / "run", reward=None)
    try:
        with pytest.raises(DrmasError, match="no usable checkpoint.*reference model differs"):
            trainer.resume()
    finally:
        trainer.close()


def test_off_by_default_leaves_no_trace(tiny_model_dir, math_rows, tmp_path):
    train = [r for r in math_rows if r["split"] == "train"]
    t = make_trainer(make_config(tiny_model_dir), train, tmp_path)
    m = t.train_step()
    assert "kl_ctrl" not in m and "reference" not in m["time"]
    assert t.groups["small"].reference is None and t.shaping.state(t.groups) is None
    t.save(tmp_path / "ckpt")
    t.close()
    assert "shaping" not in checkpoint.read_state(tmp_path / "ckpt")


def test_two_worker_group_scores_and_trains_like_one(tiny_model_dir, tmp_path):
    """With W = 2 Ray workers (FSDP2-sharded, LoRA adapters) every rank holds the whole base
    model as its reference: the rows are split over the ranks and the reference logprobs and
    digest are the one-worker group's; a balance-weighted update equals W = 1's too."""
    import ray

    from drmas.train.pool import start_ray

    s = TrainConfig(lr=1e-2, micro_batch_rows=2, max_response_tokens=8, lora_rank=4, lora_alpha=8,
                    **KL)
    one = LocalGroup("g", tiny_model_dir, AGENTS, s)
    rows = engine_rows(one)
    for r, w in zip(rows, [0.5, 1.5, 1.0, 2.0, 0.25, 1.0, 0.75]):
        r["loss_weight"] = w
    ref1, m1 = one.ref_logprobs(rows), one.update(rows, seed=3)
    start_ray(num_cpus=2)
    try:
        with two_worker_group(tiny_model_dir, AGENTS, s) as two:
            ref2, digest2 = two.ref_logprobs(rows), two.reference_digest()
            m2 = two.update(rows, seed=3)
    finally:
        ray.shutdown()
    assert len(ref2) == len(rows) and digest2 == one.reference_digest()
    for a, b in zip(ref1, ref2):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    for key in ("loss", "grad_norm"):
        assert m2[key] == pytest.approx(m1[key], rel=1e-5, abs=1e-7)
