"""The engine factory: hf by default, one-line errors for vllm without the extra and for
unknown engines; the worker reaches its engine only through the protocol."""

import pytest
import torch

from drmas.config.profile import TrainConfig
from drmas.errors import ConfigError
from drmas.rollout import engines
from drmas.rollout.base import Sampling


def test_vllm_without_the_extra_is_one_line(monkeypatch, tiny_model_dir):
    from drmas.train.workers import LocalGroup

    monkeypatch.setattr(engines, "vllm_available", lambda: False)
    with pytest.raises(ConfigError) as err:
        LocalGroup("g", tiny_model_dir, ["solver"], TrainConfig(), engine="vllm")
    assert 'pip install -e ".[vllm]"' in str(err.value) and "\n" not in str(err.value)


def test_unknown_engine(tiny_model_dir):
    from drmas.models.tiny import load_model, load_tokenizer

    with pytest.raises(ConfigError, match="sglang"):
        engines.make_engine("sglang", load_model(tiny_model_dir), load_tokenizer(tiny_model_dir),
                            model_path=tiny_model_dir, dtype=torch.float32)


def test_float32_hf_engine_shares_the_training_weights(tiny_model_dir):
    """Default path: no copy, nothing to push, sleep/wake are no-ops; a bf16 engine on the
    same group would own a copy (tests/models/test_precision.py)."""
    from drmas.train.workers import LocalGroup

    grp = LocalGroup("g", tiny_model_dir, ["solver"], TrainConfig())
    assert not grp.engine.needs_weights and grp.engine.model is grp.model
    grp.sleep()
    grp.wake()
    assert grp.sync() < 1.0
    gens = grp.generate([[{"role": "user", "content": "2 + 2?"}]], Sampling(0.0, 1.0, 4), 0)
    assert len(gens[0].response_ids) >= 1


def test_vllm_waves_fit_the_budget():
    from drmas.rollout.vllm import waves

    lengths = [5, 7, 3, 9, 1, 12]
    parts = waves(lengths, budget=12, max_seqs=2)
    assert [i for p in parts for i in p] == list(range(len(lengths)))       # all, in order
    assert all(len(p) <= 2 and (len(p) == 1 or sum(lengths[i] for i in p) <= 12) for p in parts)
    assert waves([20], budget=12) == [range(0, 1)]                          # alone if too long
    assert waves([], budget=12) == []


def test_hf_engine_sleep_drops_its_copy_and_the_update_refills_it(tiny_model_dir):
    """A bf16 copy's weights are freed by `sleep`, not moved: `generate` refuses until `wake`
    and an `update_weights` that writes every weight, and then samples exactly what an engine
    that never slept samples from the same weights."""
    from drmas.models.tiny import load_model, load_tokenizer
    from drmas.rollout.hf import HFEngine

    model, tok = load_model(tiny_model_dir), load_tokenizer(tiny_model_dir)
    awake = HFEngine(model, tok, dtype=torch.bfloat16)
    engine = HFEngine(model, tok, dtype=torch.bfloat16)
    sampling, prompts = Sampling(1.0, 0.9, 8), [[5, 6, 7], [8, 9], [5, 6, 7]]
    with torch.no_grad():                       # the trainer's weights move on
        for p in model.parameters():
            p.add_(0.01 * torch.randn_like(p))
    awake.update_weights(model.state_dict().items())
    engine.sleep()
    assert sum(p.numel() for p in engine.model.parameters()) == 0
    with pytest.raises(RuntimeError, match="dropped by sleep"):
        engine.generate(prompts, sampling, seed=3)
    engine.wake()
    with pytest.raises(RuntimeError, match="did not refill"):
        engine.update_weights(list(model.state_dict().items())[:2])
    engine.update_weights(model.state_dict().items())
    for (name, mine), theirs in zip(engine.model.named_parameters(), awake.model.parameters()):
        assert torch.equal(mine, theirs), name
    got, want = engine.generate(prompts, sampling, seed=3), awake.generate(prompts, sampling, seed=3)
    assert [g.response_ids for g in got] == [g.response_ids for g in want]
    assert [g.logprobs for g in got] == [g.logprobs for g in want]


def test_worker_that_offloads_its_engine_trains_and_resyncs(tiny_model_dir):
    """The GPU path's order on a CPU: the update puts the bf16 engine to sleep (weights
    dropped), `sync` wakes it and refills it with the trained weights."""
    from drmas.train.workers import LocalGroup

    grp = LocalGroup("g", tiny_model_dir, ["solver"], TrainConfig(lr=1e-2), dtype="bfloat16")
    grp.offload_engine = True                   # what a CUDA device sets
    gens = grp.generate([[{"role": "user", "content": "1 + 2?"}]] * 4, Sampling(1.0, 1.0, 6), 0)
    rows = [{"agent": "solver", "prompt_ids": g.prompt_ids, "response_ids": g.response_ids,
             "logprobs": g.logprobs, "advantage": a} for g, a in zip(gens, (1, -1, 0.5, -0.5))]
    grp.update(rows, seed=0)
    assert grp.engine.dropped and sum(p.numel() for p in grp.engine.model.parameters()) == 0
    grp.sync()
    trained = grp.model.state_dict()
    for name, value in grp.engine.model.state_dict().items():
        assert torch.equal(value, trained[name].to(torch.bfloat16)), name
    assert len(grp.generate([[{"role": "user", "content": "2?"}]], Sampling(0.0, 1.0, 4), 0)) == 1
