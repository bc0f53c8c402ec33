"""`search_last_turn` (drmas/config/profile.py): the default profile keeps the forced answer,
the paper profile runs upstream's current flow, and the key is part of the stage keys of the
jobs whose episodes it shapes (drmas/config/stages.py, `mas_key`): searching suites' tokenizer,
warm starts, runs and evaluations, nothing of math."""

import pytest

from repo import REPO as ROOT
from drmas.config.profile import workflow_config
from drmas.config.stages import eval_key, tokenizer_key, train_key, warmstart_key
from drmas.config.suites import load_suite
from drmas.errors import ConfigError


def keys(cfg, suite):
    return {"tokenizer": tokenizer_key(cfg, suite), "warmstart": warmstart_key(cfg, suite, "small"),
            "train": train_key(cfg, suite, "shared", "grpo", 0),
            "eval": eval_key(cfg, suite, "shared", "grpo", 0),
            "base": eval_key(cfg, suite, "shared", "base", 0)}


def test_profiles_choose_their_last_turn():
    default = workflow_config([ROOT / "config" / "default.yaml"], [])
    paper = workflow_config([ROOT / "config" / "paper.yaml"], [])
    assert (default.search_last_turn, paper.search_last_turn) == ("answer", "verify")
    with pytest.raises(ConfigError, match="search_last_turn"):
        workflow_config([ROOT / "config" / "default.yaml"], ["search_last_turn=search"])


def test_the_key_reruns_searching_suites_only():
    default = workflow_config([ROOT / "config" / "default.yaml"], [])
    verified = workflow_config([ROOT / "config" / "default.yaml"], ["search_last_turn=verify"])
    search, math = (load_suite(ROOT / "benchmarks" / f"{s}.yaml") for s in ("search", "math"))
    before, after = keys(default, search), keys(verified, search)
    for stage in before:
        assert before[stage] != after[stage], stage
        assert before[stage]["mas"]["search_last_turn"] == "answer"
    assert keys(default, math) == keys(verified, math)
    assert "search_last_turn" not in keys(default, math)["train"]["mas"]
