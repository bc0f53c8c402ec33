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


def _qwen2_head_case():
    """A random-weight Qwen2 (tied embeddings) and float32 hidden states of a few rows."""
    import transformers

    torch.manual_seed(0)
    config = transformers.Qwen2Config(vocab_size=97, hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=1, num_attention_heads=4,
                                      num_key_value_heads=2, tie_word_embeddings=True)
    model = transformers.Qwen2ForCausalLM(config).float()
    hidden = (torch.randn(3, 5, 32) * 3).requires_grad_()
    targets = torch.randint(0, 97, (3, 5))
    return model, hidden, targets


def _head_loss(model, hidden, targets, bf16: bool = False, float32_head: bool = False):
    """Logits and the gradients of a log-likelihood through the output layer; the forward
    under bf16 autocast if asked, the backward outside it (as sft runs them)."""
    cpu = torch.device("cpu")
    with precision.autocast(cpu, torch.bfloat16 if bf16 else torch.float32), \
            precision.float32_output_layer(model, enabled=float32_head):
        logits = model.lm_head(hidden)
        loss = -torch.log_softmax(logits.float(), -1).gather(-1, targets[..., None]).sum()
    model.zero_grad(set_to_none=True)
    hidden.grad = None
    loss.backward()
    return logits, model.lm_head.weight.grad.clone(), hidden.grad.clone()


def test_float32_output_layer_matches_float32_under_bf16_autocast():
    """Inside the block the output layer under bf16 autocast computes what float32 computes,
    bit for bit (logits and both gradients); outside it autocast rounds the logits to bf16;
    after it the layer is the plain one again and the state dict is untouched."""
    model, hidden, targets = _qwen2_head_case()
    keys = list(model.state_dict())
    reference = _head_loss(model, hidden, targets)                     # no autocast: float32
    rounded = _head_loss(model, hidden, targets, bf16=True)
    ours = _head_loss(model, hidden, targets, bf16=True, float32_head=True)
    assert rounded[0].dtype == torch.bfloat16 and ours[0].dtype == torch.float32
    for r, o in zip(reference, ours):
        assert torch.equal(r, o)
    for r, b in zip(reference, rounded):                               # bf16 did round
        assert not torch.allclose(r, b.float(), atol=1e-4, rtol=0)
    assert "forward" not in vars(model.lm_head) and list(model.state_dict()) == keys
    with precision.autocast(torch.device("cpu"), torch.bfloat16):
        assert model.lm_head(hidden).dtype == torch.bfloat16
    with precision.float32_output_layer(model, enabled=False):
        assert "forward" not in vars(model.lm_head)


def test_bf16_warm_start_runs_its_output_layer_in_float32(monkeypatch, tiny_model_dir, math_rows):
    """sft under bf16 autocast enters float32_output_layer (the logits its loss reads come out
    float32 from the layer itself), a float32 warm start does not need it; either way the
    model leaves sft with its plain layer."""
    from drmas.mas.math.demos import math_traces
    from drmas.models.tiny import load_model, load_tokenizer
    from drmas.train import sft as sft_module

    tok = load_tokenizer(tiny_model_dir)
    traces = math_traces([r for r in math_rows if r["split"] == "train"][:20], seed=0,
                         mistake_rate=0.3)
    for setting in ("bfloat16", "float32"):
        model = load_model(tiny_model_dir)
        seen = []
        model.lm_head.register_forward_hook(lambda m, i, out: seen.append(out.dtype))
        sft_module.sft(model, tok, traces, steps=1, batch_size=4, lr=1e-3, seed=0, dtype=setting)
        assert seen and set(seen) == {torch.float32}, setting
        assert "forward" not in vars(model.lm_head)
    monkeypatch.setattr(sft_module, "float32_output_layer",
                        lambda m, enabled=True: precision.float32_output_layer(m, False))
    model, seen = load_model(tiny_model_dir), []
    model.lm_head.register_forward_hook(lambda m, i, out: seen.append(out.dtype))
    sft_module.sft(model, tok, traces, steps=1, batch_size=4, lr=1e-3, seed=0, dtype="bfloat16")
    assert set(seen) == {torch.bfloat16}                               # what it guards against
