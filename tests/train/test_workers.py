"""Worker groups: FSDP2 with W = 2 gloo workers equals W = 1, micro-batch plans, LoRA."""

import random

import pytest
import torch

from drmas.config.profile import TrainConfig
from drmas.rollout.base import Sampling
from drmas.train.logprobs import length_chunks
from drmas.train.workers import LocalGroup, minibatches, rank_chunks
from rows import AGENTS, engine_rows
from training import equal_weights, load_weights, two_worker_group


def weights(group):
    """A copy of the group's live state dict."""
    return {k: v.detach().clone() for k, v in group.model.state_dict().items()}


@pytest.mark.parametrize("n,world,size", [(7, 2, 2), (1, 2, 4), (5, 3, 1), (8, 1, 3), (0, 2, 2)])
def test_rank_chunks_cover_rows_with_equal_counts(n, world, size):
    idx = list(range(10, 10 + n))
    plans = [rank_chunks(idx, r, world, size) for r in range(world)]
    assert len({len(p) for p in plans}) == 1                 # same number of collectives
    assert sorted(i for p in plans for c in p for i in c) == idx
    assert all(len(c) <= size for p in plans for c in p)
    if world == 1:
        assert plans[0] == [idx[j:j + size] for j in range(0, n, size)]


@pytest.mark.parametrize("world", [1, 2, 3])
def test_rank_chunks_by_length_bound_padding(world):
    rng = random.Random(world)
    lengths = [rng.randint(5, 300) for _ in range(40)]
    idx = list(range(3, 40, 2))                               # a mini-batch's agent rows
    plans = [rank_chunks(idx, r, world, 6, lengths, 600) for r in range(world)]
    assert len({len(p) for p in plans}) == 1
    assert sorted(i for p in plans for c in p for i in c) == idx
    for chunk in (c for p in plans for c in p if c):
        assert len(chunk) <= 6
        assert len(chunk) == 1 or len(chunk) * max(lengths[i] for i in chunk) <= 600


def test_length_chunks_sorted_and_within_budget():
    lengths = [50, 10, 400, 10, 30, 700, 20]
    chunks = length_chunks(lengths, max_rows=3, max_tokens=100)
    assert [lengths[i] for c in chunks for i in c] == sorted(lengths)   # shortest first
    assert chunks == [[1, 3, 6], [4, 0], [2], [5]]                      # 700 > 100: alone
    assert length_chunks([], 4, 100) == []


def test_minibatches_partition_and_repeat():
    a = minibatches(9, 2, seed=3)
    assert a == minibatches(9, 2, seed=3) and len(a) == 2
    assert sorted(i for m in a for i in m) == list(range(9))
    assert len(minibatches(1, 4, seed=0)) == 1


def test_contiguous_minibatches_cut_rows_in_data_order():
    """verl without shuffling, one worker: consecutive chunks of ceil(rows / mini-batches)."""
    assert minibatches(9, 2, seed=3, order="contiguous") == [[0, 1, 2, 3, 4], [5, 6, 7, 8]]
    assert minibatches(10, 5, seed=0, order="contiguous") == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]
    assert minibatches(10, 4, seed=0, order="contiguous") == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert minibatches(12, 5, seed=0, order="contiguous") == [[0, 1, 2], [3, 4, 5], [6, 7, 8],
                                                               [9, 10, 11]]   # 4 steps, as verl
    assert minibatches(2, 4, seed=0, order="contiguous") == [[0], [1]]
    assert minibatches(9, 2, seed=3) == minibatches(9, 2, seed=3, order="shuffled")


def upstream_minibatches(n_rows: int, n_mini: int, world: int) -> list[list[int]]:
    """A transcription of upstream's layout: `adjust_batch` sets the per-GPU mini-batch size
    to ceil(rows / (ppo_mini_update_num x world)); the batch is dispatched to the GPUs with
    `DataProto.chunk(world)` (equal contiguous shares); each GPU's `dp_actor.update_policy`
    runs `batch.split(ppo_mini_batch_size)`; optimiser step k is every GPU's k-th split."""
    per_gpu = -(-n_rows // (n_mini * world))
    share = n_rows // world
    splits = [[list(range(g * share, (g + 1) * share))[i:i + per_gpu] for i in range(0, share, per_gpu)]
              for g in range(world)]
    return [sum((gpu[k] for gpu in splits), []) for k in range(len(splits[0]))]


@pytest.mark.parametrize("world", [1, 2, 4])
def test_contiguous_minibatches_follow_upstreams_per_gpu_split(world):
    for n_rows in range(world, 161, world):          # upstream pads to a multiple of the GPUs
        for n_mini in range(1, 7):
            if n_mini > n_rows:
                continue
            assert minibatches(n_rows, n_mini, 0, "contiguous", world) == \
                upstream_minibatches(n_rows, n_mini, world), (n_rows, n_mini, world)
    # search's 5 mini-updates over 128 rows on 4 GPUs: chunks of 7 per GPU share of 32
    assert [len(m) for m in minibatches(128, 5, 0, "contiguous", 4)] == [28, 28, 28, 28, 16]


@pytest.fixture(scope="module")
def ray_cluster():
    """One local Ray for this module's tests (starting one takes seconds)."""
    import ray

    from drmas.train.pool import start_ray

    start_ray(num_cpus=2)
    yield
    ray.shutdown()


@pytest.mark.parametrize("recompute,lora", [(False, 0), (True, 4)])
def test_fsdp2_two_workers_equal_one_worker(tiny_model_dir, tmp_path, recompute, lora, ray_cluster):
    """One update with W = 2 gloo workers (FSDP2, through Ray) = the W = 1 update on the same
    batch, saved parameters to 1e-5; the metrics (per-agent norms included) agree too. The
    second case recomputes old logprobs on the sharded model and trains LoRA adapters."""
    s = TrainConfig(lr=1e-3 if not lora else 1e-2, micro_batch_rows=2, ppo_mini_batches=2,
                    max_response_tokens=8, recompute_logprobs=recompute, lora_rank=lora,
                    lora_alpha=8)
    one = LocalGroup("g", tiny_model_dir, AGENTS, s)
    rows = engine_rows(one)
    one.save(tmp_path / "before", with_optimizer=False)
    m1 = one.update(rows, seed=5)
    one.save(tmp_path / "w1")
    with two_worker_group(tiny_model_dir, AGENTS, s) as two:
        assert len(two.generate([[{"role": "user", "content": "1 + 1?"}]] * 3,
                                Sampling(1.0, 1.0, 4), seed=1)) == 3
        m2 = two.update(rows, seed=5)
        assert two.sync() > 0
        two.save(tmp_path / "w2")
        info = two.describe()
        # a W = 1 checkpoint (weights + full optimiser state) resumes on W = 2 workers
        two.load(tmp_path / "w1")
        one.update(rows, seed=6)
        two.update(rows, seed=6)
        two.sync()
        one.save(tmp_path / "w1b", with_optimizer=False)
        two.save(tmp_path / "w2b", with_optimizer=False)
    assert info["world"] == 2 and info["lr"] == s.lr and info["lora_rank"] == lora
    w0, w1, w2 = (load_weights(tmp_path / d) for d in ("before", "w1", "w2"))
    assert set(w2) == set(w1)
    assert max(float((w1[k] - w2[k]).abs().max()) for k in w1) < 1e-5
    assert max(float((w1[k] - w0[k]).abs().max()) for k in w1) > 1e-4   # the step moved them
    w1, w2 = (load_weights(tmp_path / d) for d in ("w1b", "w2b"))
    assert max(float((w1[k] - w2[k]).abs().max()) for k in w1) < 1e-5
    for key in ("loss", "grad_norm", "grad_norm_max", "entropy"):
        assert m2[key] == pytest.approx(m1[key], rel=1e-5, abs=1e-7)
    for agent in AGENTS:
        assert m2["agent_grad_norm"][agent] == pytest.approx(m1["agent_grad_norm"][agent], rel=1e-5)
        for key in ("agent_clip_frac", "agent_approx_kl"):
            assert m2[key][agent] == pytest.approx(m1[key][agent], rel=1e-5, abs=1e-7)


def test_per_agent_clip_fraction_and_kl(tiny_model_dir):
    """Per-agent clip fraction and approx KL: token means over each agent's rows, so their
    token-weighted mean is the group's; an agent whose rows carry zero advantage never clips
    (both PPO terms are 0) while the other, pushed hard, does."""
    s = TrainConfig(lr=5e-2, micro_batch_rows=2, ppo_mini_batches=3, max_response_tokens=8)
    group = LocalGroup("g", tiny_model_dir, AGENTS, s)
    rows = engine_rows(group, n=12)
    for r in rows:
        r["advantage"] = 0.0 if r["agent"] == "verifier" else 3.0 * (1 if len(r["response_ids"]) % 2 else -1)
    m = group.update(rows, seed=3)
    clip, kl = m["agent_clip_frac"], m["agent_approx_kl"]
    assert clip["verifier"] == 0.0 and clip["solver"] > 0.0
    tokens = {a: sum(len(r["response_ids"]) for r in rows if r["agent"] == a) for a in AGENTS}
    for key, per in (("clip_frac", clip), ("approx_kl", kl)):
        mixed = sum(per[a] * tokens[a] for a in AGENTS) / sum(tokens.values())
        assert mixed == pytest.approx(m[key], rel=1e-9, abs=1e-12)
    only = group.update([r for r in rows if r["agent"] == "solver"], seed=4)
    assert set(only["agent_clip_frac"]) == {"solver"}


def test_lora_trains_adapters_and_saves_merged_weights(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    s = TrainConfig(lr=1e-2, micro_batch_rows=4, ppo_mini_batches=1, lora_rank=4, lora_alpha=8)
    group = LocalGroup("g", tiny_model_dir, AGENTS, s)
    info = group.describe()
    assert 0 < info["trainable_params"] < info["params"] / 10 and info["lora_rank"] == 4
    rows = engine_rows(group)
    group.update(rows, seed=1)
    group.save(tmp_path / "ckpt")
    assert {"model.safetensors", "lora.safetensors", "optimizer.pt"} <= {
        p.name for p in (tmp_path / "ckpt").iterdir()}
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "ckpt")   # no peft needed
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    ids = torch.tensor([rows[0]["prompt_ids"]])
    with torch.no_grad():
        ours = group.model(input_ids=ids).logits
        assert torch.allclose(merged(input_ids=ids).logits, ours, atol=1e-4)
        assert not torch.allclose(base(input_ids=ids).logits, ours, atol=1e-4)
    # resume: a fresh group loaded from the checkpoint takes the same next step
    resumed = LocalGroup("g", tiny_model_dir, AGENTS, s)
    resumed.load(tmp_path / "ckpt")
    group.update(rows, seed=2)
    resumed.update(rows, seed=2)
    assert equal_weights(weights(group), weights(resumed), same_keys=False)


def test_save_load_roundtrip_is_exact(tiny_model_dir, tmp_path):
    s = TrainConfig(lr=1e-3, micro_batch_rows=4, ppo_mini_batches=2)
    group = LocalGroup("g", tiny_model_dir, AGENTS, s)
    rows = engine_rows(group)
    group.update(rows, seed=1)
    group.save(tmp_path / "ckpt")
    resumed = LocalGroup("g", tiny_model_dir, AGENTS, s)
    resumed.load(tmp_path / "ckpt")
    assert group.update(rows, seed=2) == resumed.update(rows, seed=2)
    assert equal_weights(weights(group), weights(resumed), same_keys=False)
