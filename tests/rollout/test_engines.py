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
