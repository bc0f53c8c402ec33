"""A pretrained model's format warm start (`models.<name>.warmstart` set on a pretrained
model): `drmas warmstart` starts from the model's own weights and tokenizer, trains on the
MAS's demonstrations in the profile's prompt set rendered by the model's chat template, and
the workflow then treats the result as the base model (model_dir, run identity)."""

import json

import pytest
import torch
import yaml

from drmas.cli import main as cli
from drmas.config.groups import model_dir
from drmas.config.profile import from_dict
from drmas.config.stages import train_key
from drmas.config.suites import load_suite
from drmas.data.io import write_jsonl
from drmas.errors import DataError
from drmas.mas.base import Episode
from drmas.mas.math.demos import math_traces
from drmas.mas.math.prompts import PROMPT_SETS
from drmas.mas.math.solver import Solver
from drmas.models.encoding import encode_prompt
from drmas.models.tiny import load_model, load_tokenizer
from repo import REPO

WARM = {"steps": 4, "batch_size": 4, "lr": 1.0e-3, "dtype": "float32", "mistake_rate": 0.2}


def raw_config(model_path, warmstart=None, prompt_set="smol") -> dict:
    spec = {"kind": "pretrained", "path": str(model_path), "dtype": "float32"}
    if warmstart is not None:
        spec["warmstart"] = warmstart
    return {"profile": "test", "seeds": [0], "suites": ["math"], "methods": ["grpo"],
            "assignments": ["shared"], "prompt_set": prompt_set, "threads": 1,
            "models": {"chat": spec},
            "assignment_defs": {"shared": {"share": True, "models": {"default": "chat"}}},
            "train": {"steps": 1, "prompts_per_step": 2, "group_n": 2, "max_response_tokens": 8,
                      "micro_batch_tokens": 4096}}


@pytest.fixture
def prepared(tmp_path, math_rows):
    data = tmp_path / "data"
    write_jsonl(data / "train.jsonl", [r for r in math_rows if r["split"] == "train"])
    write_jsonl(data / "test.jsonl", [r for r in math_rows if r["split"] == "test"])
    return data


def write_config(tmp_path, raw) -> str:
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def test_a_pretrained_model_is_warm_started_only_with_its_own_block(tiny_model_dir, tmp_path):
    plain = from_dict(raw_config(tiny_model_dir))
    warm = from_dict(raw_config(tiny_model_dir, WARM))
    assert not plain.warm_started("chat") and warm.warm_started("chat")
    assert model_dir(plain, "math", "chat") == tiny_model_dir
    assert model_dir(warm, "math", "chat") == warm.results / "models" / "math" / "chat"
    suite = load_suite(REPO / "benchmarks" / "math.yaml")
    # the warm start decides the base weights, so it is part of a run's identity
    assert train_key(plain, suite, "shared", "grpo", 0)["warmstart"] == {}
    key = train_key(warm, suite, "shared", "grpo", 0)["warmstart"]["chat"]
    assert (key["steps"], key["lr"], key["mistake_rate"]) == (4, 1.0e-3, 0.2)


def test_math_demonstrations_in_another_prompt_set(math_rows):
    rows = [r for r in math_rows if r["split"] == "train"][:20]
    solver = Solver(PROMPT_SETS["smol"])
    first_prompts = [solver.prompt(Episode(problem=r)) for r in rows]
    traces = math_traces(rows, seed=0, mistake_rate=0.0, prompt_set="smol")
    # each problem's first Solver prompt, in smol's words, in the problems' order
    assert [m for agent, m, _ in traces if agent == "solver" and m in first_prompts] == first_prompts
    compact = math_traces(rows, seed=0, mistake_rate=0.0)
    assert [r for *_, r in traces] == [r for *_, r in compact]      # the same replies ...
    assert all(a[1] != b[1] for a, b in zip(traces, compact))       # ... asked in other words
    with pytest.raises(DataError, match="'gsm8k-1' has no worked steps"):
        math_traces([{"id": "gsm8k-1", "question": "?", "answers": ["1"]}], seed=0, mistake_rate=0.0)


def test_warmstart_trains_the_pretrained_weights_on_its_chat_template(tiny_model_dir, tmp_path,
                                                                      prepared, capsys, monkeypatch):
    from drmas.train import sft

    config = write_config(tmp_path, raw_config(tiny_model_dir, WARM))
    out = tmp_path / "warm"
    seen, real = [], sft.sft

    def spy(model, tokenizer, traces, **kw):
        seen.append((traces, kw))
        return real(model, tokenizer, traces, **kw)

    monkeypatch.setattr(sft, "sft", spy)
    status = cli.main(["warmstart", "--config", config, "--suite", str(REPO / "benchmarks" / "math.yaml"),
                       "--data", str(prepared), "--model", "chat", "--out", str(out)])
    assert status in (0, None), capsys.readouterr().err
    assert "warm start chat (pretrained) on" in capsys.readouterr().out
    # the profile's prompt set and mistake rate, the RL update's micro-batch budget
    rows = [json.loads(l) for l in (prepared / "train.jsonl").read_text().splitlines()]
    (traces, kw), = seen
    assert traces == math_traces(rows, seed=0, mistake_rate=0.2, prompt_set="smol")
    assert kw["micro_batch_tokens"] == 4096 and kw["steps"] == 4 and kw["lr"] == 1.0e-3
    losses = json.loads((out / "sft_losses.json").read_text())
    assert len(losses) == WARM["steps"] and losses[-1] < losses[0]
    base, warm = load_model(tiny_model_dir), load_model(out)
    changed = [k for k, v in warm.state_dict().items() if not torch.equal(v, base.state_dict()[k])]
    assert changed and len(changed) == len(base.state_dict())      # every tensor trained
    # the model keeps its tokenizer and chat template: prompts encode to the same ids
    messages = Solver(PROMPT_SETS["smol"]).prompt(Episode(problem={"question": "1 + 2 = ?"}))
    assert encode_prompt(load_tokenizer(out), messages) == encode_prompt(load_tokenizer(tiny_model_dir), messages)


def test_warmstart_refuses_a_pretrained_model_without_a_block(tiny_model_dir, tmp_path, prepared,
                                                             capsys):
    config = write_config(tmp_path, raw_config(tiny_model_dir))
    status = cli.main(["warmstart", "--config", config, "--suite", str(REPO / "benchmarks" / "math.yaml"),
                       "--data", str(prepared), "--model", "chat", "--out", str(tmp_path / "w")])
    assert status == 2 and not (tmp_path / "w").exists()
    assert capsys.readouterr().err.strip() == (
        "drmas warmstart: error: model 'chat' is pretrained without a `warmstart:` block: it is "
        "not warm-started (set models.chat.warmstart to do so)")


def test_warmstart_seed_from_the_config_unless_given(tiny_model_dir, tmp_path, prepared, capsys,
                                                     monkeypatch):
    """`warmstart.seed` seeds the demonstrations and the SFT (`drmas warmstart --seed` over it);
    it is part of the warm start's and the runs' identity, except at 0, its value before the
    key existed (identities of earlier warm starts unchanged)."""
    from drmas.train import sft

    suite = load_suite(REPO / "benchmarks" / "math.yaml")
    seeded = {**WARM, "seed": 3}
    assert "seed" not in train_key(from_dict(raw_config(tiny_model_dir, {**WARM, "seed": 0})),
                                   suite, "shared", "grpo", 0)["warmstart"]["chat"]
    assert train_key(from_dict(raw_config(tiny_model_dir, seeded)), suite, "shared", "grpo",
                     0)["warmstart"]["chat"]["seed"] == 3
    seen = []

    def spy(model, tokenizer, traces, **kw):
        seen.append((traces, kw["seed"]))
        return [1.0] * kw["steps"]

    monkeypatch.setattr(sft, "sft", spy)
    config = write_config(tmp_path, raw_config(tiny_model_dir, seeded))
    rows = [json.loads(l) for l in (prepared / "train.jsonl").read_text().splitlines()]
    for extra, seed in (([], 3), (["--seed", "5"], 5)):
        status = cli.main(["warmstart", "--config", config, "--suite",
                           str(REPO / "benchmarks" / "math.yaml"), "--data", str(prepared),
                           "--model", "chat", "--out", str(tmp_path / f"w{seed}"), *extra])
        assert status in (0, None), capsys.readouterr().err
        traces, used = seen.pop()
        assert used == seed
        assert traces == math_traces(rows, seed=seed, mistake_rate=0.2, prompt_set="smol")
    assert math_traces(rows, seed=3, mistake_rate=0.2) != math_traces(rows, seed=5, mistake_rate=0.2)
