"""The four-agent math suite through the real workflow, with the KL penalty in the reward and
loss balancing on (slow: `pytest -m slow`): data, tokenizer, warm start of all four roles,
RL, evaluation, tables."""

import json

import pandas as pd
import pytest
import yaml

import streaming
from repo import copy_workflow, snakemake_bin, workflow_env

PROFILE = {
    "profile": "m4", "suites": ["math4"], "assignments": ["nonshared"], "seeds": [0],
    "methods": ["grpo", "drmas"], "datasets": {"math4": "basic"},
    "models": {"small": {"kind": "tiny", "hidden_size": 64, "layers": 2, "heads": 1,
                         "intermediate_size": 128}},
    "assignment_defs": {"nonshared": {"share": False, "models": {"default": "small"}}},
    "prompt_set": "compact",
    "tokenizer": {"vocab_size": 512},
    "warmstart": {"steps": 40, "batch_size": 16, "lr": 3.0e-3, "mistake_rate": 0.3},
    "train": {"steps": 3, "prompts_per_step": 4, "group_n": 4, "ppo_mini_batches": 2,
              "micro_batch_rows": 64, "lr": 5.0e-5, "max_response_tokens": 24, "save_every": 2,
              "max_prompt_tokens": 448, "loss_balance": True, "kl_in_reward": True},
    "eval": {"n": 4, "batch_size": 128, "max_problems_per_source": 4},
}


@pytest.mark.slow
def test_math4_suite_end_to_end(tmp_path, capsys):
    copy_workflow(tmp_path)
    (tmp_path / "config" / "m4.yaml").write_text(yaml.safe_dump(PROFILE))
    cmd = [snakemake_bin(), "--cores", "2", "--configfile", "config/m4.yaml"]
    proc = streaming.run(cmd, tmp_path, workflow_env(), capsys, timeout=2400, label="math4")
    assert proc.returncode == 0, proc.stderr[-4000:]

    res = tmp_path / "results" / "m4"
    table = pd.read_csv(res / "tables" / "math4.csv")
    assert len(table) == 4                              # nonshared x (base, grpo, drmas, Δ)
    assert {"addsub-1 avg@4", "Avg pass@4"} <= set(table.columns)
    for method in ("grpo", "drmas"):
        run = res / "runs" / "math4" / "nonshared" / method / "seed0"
        lines = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]
        assert [m["step"] for m in lines] == [1, 2, 3]
        assert set(lines[0]["groups"]) == {"solver", "critic", "refiner", "verifier"}
        assert all(m["agents"][a]["calls"] > 0 for m in lines for a in ("critic", "refiner"))
        assert all(set(m["kl_ctrl"]) >= {"beta", "mean_kl"} and m["loss_balance"] for m in lines)
        assert lines[0]["kl_ctrl"]["beta"] == 0.001
        for agent in ("solver", "critic", "refiner", "verifier"):
            assert (run / "final" / agent / "model.safetensors").exists()
    scores = json.loads((res / "evals" / "math4" / "nonshared" / "drmas" / "seed0" / "scores.json").read_text())
    assert scores["n"] == 4 and set(scores["per_source"]) == {"addsub-1", "addsub-2", "mul-addsub"}
