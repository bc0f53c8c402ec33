"""A profile's `mas_options.<mas>` (drmas/config/profile.py), over the benchmark files'
`mas_options:`: the default and paper profiles run the search benchmark's upstream flow
(`last_turn: verify`), the withholding profile states it, the earlier forced answer (`answer`)
is one override away, and the options are part of the stage keys of the jobs whose episodes
they shape (drmas/config/stages.py, `mas_key`): searching suites' tokenizer, warm starts, runs and
evaluations, nothing of math. The keys keep the names and values they had when these were
profile and benchmark keys, so that existing runs keep their identity."""

import pytest

from repo import REPO as ROOT
from drmas.config.profile import workflow_config
from drmas.config.stages import eval_key, tokenizer_key, train_key, warmstart_key
from drmas.config.suites import check_agents_exist, load_suite, mas_options
from drmas.errors import ConfigError


def keys(cfg, suite):
    return {"tokenizer": tokenizer_key(cfg, suite), "warmstart": warmstart_key(cfg, suite, "small"),
            "train": train_key(cfg, suite, "shared", "grpo", 0),
            "eval": eval_key(cfg, suite, "shared", "grpo", 0),
            "base": eval_key(cfg, suite, "shared", "base", 0)}


def suite(name):
    return load_suite(ROOT / "benchmarks" / f"{name}.yaml")


def test_profiles_choose_their_last_turn():
    default = workflow_config([ROOT / "config" / "default.yaml"], [])
    paper = workflow_config([ROOT / "config" / "paper.yaml"], [])
    withholding = workflow_config([ROOT / "config" / "withholding.yaml"], [])
    answering = workflow_config([ROOT / "config" / "default.yaml"], ["mas_options={search: {last_turn: answer}}"])
    assert default.mas_options == {} and paper.mas_options == {}
    assert withholding.mas_options == {"search": {"last_turn": "verify"}}
    assert [mas_options(c, suite("search")).last_turn
            for c in (default, paper, withholding, answering)] == ["verify", "verify", "verify", "answer"]
    with pytest.raises(ConfigError, match=r"^config: mas_options.search.last_turn: 'search' is not one of"):
        check_agents_exist(workflow_config([ROOT / "config" / "default.yaml"],
                                           ["mas_options={search: {last_turn: search}}"]))


def test_the_option_reruns_searching_suites_only():
    default = workflow_config([ROOT / "config" / "default.yaml"], [])
    answering = workflow_config([ROOT / "config" / "default.yaml"], ["mas_options={search: {last_turn: answer}}"])
    search, math = suite("search"), suite("math")
    before, after = keys(default, search), keys(answering, search)
    for stage in before:
        assert before[stage] != after[stage], stage
        assert before[stage]["mas"]["search_last_turn"] == "verify"
        assert after[stage]["mas"]["search_last_turn"] == "answer"
    assert keys(default, math) == keys(answering, math)
    assert "search_last_turn" not in keys(default, math)["train"]["mas"]


def test_a_math_option_reruns_math_suites_only():
    default = workflow_config([ROOT / "config" / "default.yaml"], [])
    three = workflow_config([ROOT / "config" / "default.yaml"], ["mas_options={math: {max_loop: 3}}"])
    assert keys(default, suite("search")) == keys(three, suite("search"))
    before, after = keys(default, suite("math")), keys(three, suite("math"))
    assert [k["mas"]["max_loop"] for k in before.values()] == [2] * 5
    assert [k["mas"]["max_loop"] for k in after.values()] == [3] * 5


def test_the_mas_keys_are_the_ones_runs_were_made_with():
    """The keys every suite's MAS key held before the options moved into the MAS, unchanged:
    no run of an existing profile reruns or loses its checkpoints for the move."""
    default = workflow_config([ROOT / "config" / "default.yaml"], [])
    common = {"max_loop": 2, "max_turns": 4, "topk": 3}
    assert keys(default, suite("search"))["train"]["mas"] == {
        "mas": "search", "agents": ["verifier", "searcher", "answerer"], "reward": "qa",
        "invalid_penalty": 0.01, "retrieval": True, **common, "search_last_turn": "verify"}
    assert keys(default, suite("math"))["train"]["mas"] == {
        "mas": "math", "agents": ["solver", "verifier"], "reward": "math", "invalid_penalty": 0.1,
        "retrieval": False, **common}
