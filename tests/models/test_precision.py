"""dtype: auto picks bf16 only where the hardware runs it fast; every capability answer forced."""

import pytest
import torch

from drmas.models import precision
from drmas.errors import ConfigError


@pytest.fixture
def force(monkeypatch):
    """Force the hardware's answers: CPU features, the matmul probe, CUDA bf16 support."""
    def apply(features=(), speedup=0.5, cuda_bf16=False):
        precision.cpu_bf16_fast.cache_clear()
        monkeypatch.setattr(precision, "cpu_bf16_features", lambda: set(features))
        monkeypatch.setattr(precision, "bf16_matmul_speedup", lambda: speedup)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: cuda_bf16)
    yield apply
    precision.cpu_bf16_fast.cache_clear()


@pytest.mark.parametrize("features,speedup,expected", [
    ({"amx_bf16"}, 0.01, torch.bfloat16),          # AMX: bf16, whatever a probe would say
    ({"avx512_bf16"}, 0.01, torch.bfloat16),
    ((), 0.012, torch.float32),                    # AVX2-only EPYC: bf16 emulated, 80x slower
    ((), 0.9, torch.float32),                      # not faster: float32
    ((), 1.8, torch.bfloat16),                     # an unlisted feature that the probe sees
])
def test_auto_on_cpu(force, features, speedup, expected):
    force(features, speedup)
    dtype, why = precision.resolve_dtype("auto", "cpu")
    assert dtype == expected and why.startswith("auto")


@pytest.mark.parametrize("supported,expected", [(True, torch.bfloat16), (False, torch.float32)])
def test_auto_on_cuda(force, supported, expected):
    force(features={"amx_bf16"}, cuda_bf16=supported)     # the CPU's answer does not matter
    assert precision.resolve_dtype("auto", "cuda")[0] == expected


def test_explicit_settings_win_and_bad_ones_fail(force):
    force(features=(), speedup=0.01)
    assert precision.resolve_dtype("bfloat16", "cpu")[0] == torch.bfloat16
    force(features={"amx_bf16"})
    assert precision.resolve_dtype("float32", "cpu")[0] == torch.float32
    with pytest.raises(ConfigError, match="float16"):
        precision.resolve_dtype("float16", "cpu")


def test_warm_start_follows_the_rule(force, monkeypatch, tiny_model_dir, math_rows):
    """sft trains under bf16 autocast exactly when auto resolves to bf16."""
    from drmas.mas.math.demos import math_traces
    from drmas.models.tiny import load_model, load_tokenizer
    from drmas.train import sft as sft_module

    seen = []
    real = precision.autocast
    monkeypatch.setattr(sft_module, "autocast", lambda d, t: seen.append(t) or real(d, t))
    tok = load_tokenizer(tiny_model_dir)
    traces = math_traces([r for r in math_rows if r["split"] == "train"][:20], seed=0, mistake_rate=0.3)
    for features, expected in (((), torch.float32), ({"amx_bf16"}, torch.bfloat16)):
        force(features, speedup=0.01)
        seen.clear()
        sft_module.sft(load_model(tiny_model_dir), tok, traces, steps=1, batch_size=4, lr=1e-3,
                       seed=0)
        assert seen and set(seen) == {expected}


def test_worker_records_its_dtype(force, tiny_model_dir):
    """The worker resolves its dtype once, trains with float32 master weights, and its engine
    holds bf16 weights of its own (refreshed by sync) when bf16 is chosen."""
    from drmas.config.profile import TrainConfig
    from drmas.rollout.base import Sampling
    from drmas.train.workers import LocalGroup

    force(features={"avx512_bf16"})
    grp = LocalGroup("g", tiny_model_dir, ["solver"], TrainConfig(lr=1e-2), dtype="auto")
    info = grp.describe()
    assert info["dtype"] == "bfloat16" and info["engine"] == "hf"
    assert next(grp.model.parameters()).dtype == torch.float32
    assert grp.engine.needs_weights and grp.engine.dtype == torch.bfloat16
    gens = grp.generate([[{"role": "user", "content": "1 + 2?"}]] * 4, Sampling(1.0, 1.0, 6), 0)
    rows = [{"agent": "solver", "prompt_ids": g.prompt_ids, "response_ids": g.response_ids,
             "logprobs": g.logprobs, "advantage": a} for g, a in zip(gens, (1, -1, 0.5, -0.5))]
    grp.update(rows, seed=0)
    grp.sync()
    trained = grp.model.state_dict()
    for name, value in grp.engine.model.state_dict().items():
        assert value.dtype == torch.bfloat16
        assert torch.equal(value, trained[name].to(torch.bfloat16))
