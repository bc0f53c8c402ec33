"""The vLLM engine against the transformers engine, float32, on a tiny head_dim-64 Qwen2:
greedy generations equal token for token, logprobs within 1e-3, and after one optimiser step
+ `update_weights` (no restart, no disk) vLLM follows the updated model.

Needs the vllm extra (`pip install -e ".[vllm]"`, see docs/operations.md, "Engines and hardware"); run with `-m vllm`.
"""

import random

import pytest
import torch

pytestmark = pytest.mark.vllm
pytest.importorskip("vllm", reason='vLLM is not installed (pip install -e ".[vllm]")')

from drmas.config.profile import TrainConfig                  # noqa: E402
from drmas.rollout.base import Sampling               # noqa: E402
from drmas.train.workers import LocalGroup            # noqa: E402

GREEDY = Sampling(temperature=0.0, top_p=1.0, max_tokens=12)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, math_rows):
    """A tiny Qwen2 (head_dim 64) with N(0, 0.1) matrices: unlike the 0.02 init, whose greedy
    replies are one repeated token, its replies differ from prompt to prompt (no training
    needed, which on a busy 2-core machine takes minutes)."""
    from conftest import math_tokenizer
    from drmas.models.tiny import tiny_model

    tok = math_tokenizer(math_rows)
    model = tiny_model({"hidden_size": 128, "layers": 2, "heads": 2, "intermediate_size": 256},
                       len(tok), seed=0)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.1, generator=gen)
    path = tmp_path_factory.mktemp("vllm_model")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def prompts(rows, n=24):
    return [[{"role": "user", "content": f"Problem: {r['question']}\nSolve it step by step. "
                                         f"Put the answer in \\boxed{{}}."}] for r in rows[:n]]


@pytest.fixture(scope="module")
def groups(model_dir):
    s = TrainConfig(lr=1e-2, micro_batch_rows=8, ppo_mini_batches=1, max_response_tokens=12,
                    recompute_logprobs=True)          # as the vLLM group does in any case
    hf = LocalGroup("g", model_dir, ["solver"], s, engine="hf", dtype="float32")
    vl = LocalGroup("g", model_dir, ["solver"], s, engine="vllm", dtype="float32")
    return hf, vl


def compare(a, b):
    assert [g.response_ids for g in a] == [g.response_ids for g in b]
    for x, y in zip(a, b):
        assert x.finished == y.finished and x.text == y.text
        assert max(abs(p - q) for p, q in zip(x.logprobs, y.logprobs)) < 1e-3


def test_greedy_equal_token_for_token(groups, math_rows):
    hf, vl = groups
    ask = prompts(math_rows)
    a, b = hf.generate(ask, GREEDY, seed=0), vl.generate(ask, GREEDY, seed=0)
    assert len(a) >= 20
    assert len({tuple(g.response_ids) for g in a}) > 15         # not one degenerate reply
    compare(a, b)
    assert vl.describe()["engine"] == "vllm"


def test_seeded_sampling_repeats(groups, math_rows):
    _, vl = groups
    ask = prompts(math_rows, 8)
    s = Sampling(1.0, 1.0, 10)
    a, b, c = (vl.generate(ask, s, seed=k) for k in (4, 4, 5))
    assert [g.response_ids for g in a] == [g.response_ids for g in b]
    assert [g.response_ids for g in a] != [g.response_ids for g in c]


def test_update_weights_follow_the_trainer(groups, math_rows):
    """One PPO step on the same rows in both groups (the vLLM group recomputes old logprobs
    with its trainer), then `sync` pushes the weights into the running vLLM engine."""
    hf, vl = groups
    ask = prompts(math_rows, 16)
    gens = hf.generate(ask, Sampling(1.0, 1.0, 12), seed=1)
    rng = random.Random(0)
    rows = [{"agent": "solver", "prompt_ids": g.prompt_ids, "response_ids": g.response_ids,
             "logprobs": g.logprobs, "advantage": rng.uniform(-1, 1)} for g in gens]
    before = {k: v.clone() for k, v in hf.model.state_dict().items()}
    hf.update(rows, seed=0)
    vl.update(rows, seed=0)
    vl.sync()
    after = hf.model.state_dict()
    assert all(torch.equal(after[k], vl.model.state_dict()[k]) for k in after)
    assert any(not torch.equal(before[k], after[k]) for k in after)
    a, b = hf.generate(ask, GREEDY, seed=0), vl.generate(ask, GREEDY, seed=0)
    old = LocalGroup("g", hf.model.config._name_or_path, ["solver"], hf.settings)
    assert [g.response_ids for g in a] != [g.response_ids for g in old.generate(ask, GREEDY, 0)]
    compare(a, b)
