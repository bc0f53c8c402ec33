"""Config loading and validation: one-line errors for bad values and unknown names."""

import copy

import pytest
import yaml

from drmas.config import ROOT, from_dict, load, load_suite
from drmas.errors import ConfigError

DEFAULT = yaml.safe_load((ROOT / "config" / "default.yaml").read_text())


def with_change(path, value):
    raw = copy.deepcopy(DEFAULT)
    node = raw
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return raw


def test_default_profile_loads():
    cfg = load(ROOT / "config" / "default.yaml")
    assert cfg.profile == "default" and cfg.eval.n == 16
    assert cfg.eval.temperature == 0.6 and cfg.eval.top_p == 0.95
    assert cfg.assignment("hetero").model_of("solver") == "medium"
    assert cfg.assignment("hetero").model_of("verifier") == "small"


@pytest.mark.parametrize("path,value,message", [
    (("train", "lr"), "fast", r"train\.lr: 'fast' is not of type 'number'"),
    (("train", "lr"), 3.0, r"train\.lr: 3\.0 is greater than the maximum of 1"),
    (("train", "group_n"), 1, r"train\.group_n: 1 is less than the minimum of 2"),
    (("eval", "top_p"), 0, r"eval\.top_p"),
    (("methods",), ["grpo", "ppo"], r"methods\.1: 'ppo' is not one of"),
    (("train", "bogus"), 1, r"train: Additional properties are not allowed \('bogus'"),
    (("assignments",), ["shared", "solo"], r"'solo' is not defined in assignment_defs"),
])
def test_schema_errors_are_one_line(path, value, message):
    with pytest.raises(ConfigError, match=message) as err:
        from_dict(with_change(path, value))
    assert "\n" not in str(err.value)


def test_roles_of_a_model_are_the_agents_it_plays():
    cfg = load(ROOT / "config" / "default.yaml")
    search = ["verifier", "searcher", "answerer"]
    assert cfg.roles_of("small", search) == search          # shared and nonshared play all
    assert cfg.roles_of("medium", search) == ["answerer"]   # hetero's answerer only
    assert cfg.roles_of("medium", ["solver", "verifier"]) == ["solver"]
    only_shared = from_dict(with_change(("assignments",), ["shared"]))
    assert only_shared.roles_of("medium", search) == []


def test_model_warmstart_keys_override_the_suite_ones():
    raw = with_change(("models", "medium", "warmstart"), {"steps": 7})
    raw["suite_overrides"] = {"search": {"warmstart": {"steps": 900, "lr": 1.0e-3}}}
    search = from_dict(raw).for_suite("search")
    assert (search.warmstart_for("small").steps, search.warmstart_for("small").lr) == (900, 1.0e-3)
    assert (search.warmstart_for("medium").steps, search.warmstart_for("medium").lr) == (7, 1.0e-3)
    bad = with_change(("models", "medium", "warmstart"), {"stepz": 7})
    with pytest.raises(ConfigError, match=r"models\.medium\.warmstart"):
        from_dict(bad)


def test_unknown_model_in_assignment():
    raw = with_change(("assignment_defs", "hetero", "models", "solver"), "huge")
    with pytest.raises(ConfigError, match="unknown model 'huge'"):
        from_dict(raw)


def test_per_agent_override():
    raw = with_change(("agents",), {"verifier": {"lr": 1.0e-4}})
    cfg = from_dict(raw)
    assert cfg.agent_train("verifier").lr == 1.0e-4
    assert cfg.agent_train("solver").lr == cfg.train.lr


def test_suite_overrides_apply_to_that_suite_only():
    raw = with_change(("agents",), {"verifier": {"lr": 1.0e-4}})
    raw["suite_overrides"] = {"search": {"warmstart": {"steps": 900}, "train": {"group_n": 4},
                                         "agents": {"verifier": {"temperature": 0.8},
                                                    "answerer": {"lr": 2.0e-4}}}}
    cfg = from_dict(raw)
    assert cfg.for_suite("math") is cfg
    s = cfg.for_suite("search")
    assert (s.warmstart.steps, s.warmstart.lr) == (900, cfg.warmstart.lr)      # merged, not replaced
    assert (s.train.group_n, s.train.steps) == (4, cfg.train.steps)
    assert s.agent_train("verifier").lr == 1.0e-4 and s.agent_train("verifier").temperature == 0.8
    assert s.agent_train("answerer").lr == 2.0e-4
    assert cfg.warmstart.steps == DEFAULT["warmstart"]["steps"]                  # untouched
    bad = copy.deepcopy(raw)
    bad["suite_overrides"]["search"]["train"]["bogus"] = 1
    with pytest.raises(ConfigError, match=r"suite_overrides\.search\.train"):
        from_dict(bad)


def test_suite_file_unknown_agent(tmp_path):
    spec = yaml.safe_load((ROOT / "benchmarks" / "math.yaml").read_text())
    assert load_suite(ROOT / "benchmarks" / "math.yaml").agents == ["solver", "verifier"]
    spec["agents"] = ["solver", "critic"]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(ConfigError, match="unknown agent .critic. for MAS .math."):
        load_suite(path)
