"""Config loading and validation: one-line errors for bad values and unknown names."""

import copy

import pytest
import yaml

from repo import REPO as ROOT
from drmas.config.profile import WarmstartConfig, from_dict, load
from drmas.config.suites import load_suite
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
    (("methods",), ["grpo", "ppo"], r"methods: 'ppo' is neither an estimator"),
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
    raw["suite_overrides"] = {"search": {"warmstart": {"steps": 777}, "train": {"group_n": 4},
                                         "agents": {"verifier": {"temperature": 0.8},
                                                    "answerer": {"lr": 2.0e-4}}}}
    cfg = from_dict(raw)
    assert cfg.for_suite("math") is cfg
    s = cfg.for_suite("search")
    assert (s.warmstart.steps, s.warmstart.lr) == (777, cfg.warmstart.lr)      # merged, not replaced
    assert (s.train.group_n, s.train.steps) == (4, cfg.train.steps)
    assert s.agent_train("verifier").lr == 1.0e-4 and s.agent_train("verifier").temperature == 0.8
    assert s.agent_train("answerer").lr == 2.0e-4
    top = raw.get("warmstart", {}).get("steps", WarmstartConfig().steps)
    assert cfg.warmstart.steps == top != 777                                      # untouched
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


def test_schema_file_is_generated_from_the_dataclasses():
    """config/schema.yaml documents every key; it is `drmas config schema`'s output."""
    from drmas.config.show import schema_yaml

    assert (ROOT / "config" / "schema.yaml").read_text() == schema_yaml()


def test_every_key_has_help_and_one_default():
    """Help text for every key; defaults in the dataclasses only (the schema repeats them)."""
    from drmas.config.profile import config_schema

    def walk(node, path):
        for key, sub in node.get("properties", {}).items():
            assert sub.get("description"), f"{path}{key} has no help text"
            walk(sub, f"{path}{key}.")
            if isinstance(sub.get("additionalProperties"), dict):
                walk(sub["additionalProperties"], f"{path}{key}.<name>.")
    walk(config_schema(), "")


@pytest.mark.parametrize("profile", sorted(p.name for p in (ROOT / "config").glob("*.yaml")
                                           if p.name != "schema.yaml"))
def test_config_show_works_for_every_shipped_profile(profile):
    from drmas.config.show import show

    text = show([ROOT / "config" / profile])
    assert f"# profile {ROOT / 'config' / profile}" in text and "# default" in text


def test_config_show_names_each_source():
    from drmas.config.show import resolve_with_sources, show, source_of

    files, over = [ROOT / "config" / "default.yaml"], ["train={lr: 5.0e-4}"]
    resolved, sources = resolve_with_sources(files, over, suite="search")
    assert resolved["train"]["lr"] == 5e-4 and source_of("train.lr", sources) == "command line"
    assert resolved["train"]["group_n"] == 5
    assert source_of("train.group_n", sources) == "suite_overrides.search"
    assert source_of("train.weight_decay", sources) == "default"
    assert source_of("train.micro_batch_rows", sources).startswith("profile ")
    text = show(files, over, suite="search")
    train = text[text.index("\ntrain:"):text.index("\nagents:")]
    assert any(l.startswith("  group_n: 5 ") and l.endswith("# suite_overrides.search")
               for l in train.splitlines())


@pytest.mark.parametrize("override,message", [
    ("train={lr: .nan}", r"train\.lr: nan is not a finite number"),
    ("train={lr: .inf}", r"train\.lr: inf is not a finite number"),
    ("train={group_n: 2.0}", r"train\.group_n: 2\.0 is not of type 'integer'"),
    ("train={steps: true}", r"train\.steps: True is not of type 'integer'"),
    ("agents={solver: {group_n: 4}}", r"agents\.solver\.group_n: a run-wide key"),
    ("models={extra: {kind: pretrained}}", r"models\.extra: a pretrained model needs a path"),
    ("models={extra: {kind: tiny, layers: 2}}", r"models\.extra: a tiny model needs hidden_size, heads"),
    ("seeds=[0,-1]", r"seeds\.1: -1 is less than the minimum of 0"),
    ("models={small: {hidden_size: 100000000}}",
     r"models\.small: a tiny model of [\d,]+M parameters \([\d,]+ GiB with AdamW states in float32\) is not tiny"),
])
def test_values_the_schema_once_let_through_are_one_line_errors(override, message):
    from drmas.config.profile import workflow_config

    with pytest.raises(ConfigError, match=message) as err:
        workflow_config([ROOT / "config" / "default.yaml"], [override])
    assert "\n" not in str(err.value)


def test_an_agent_no_mas_has_is_one_line_error_for_a_command_and_for_the_workflow():
    """A profile loads without importing any MAS; the agents of per-agent blocks are checked
    against the MAS registry by a single command and against the configured suites by the
    workflow (tests/workflow/test_workflow.py runs the latter through `snakemake -n`)."""
    from drmas.config.profile import workflow_config
    from drmas.config.suites import check_agents_exist, check_suites, load_suite, suite_path

    cfg = workflow_config([ROOT / "config" / "default.yaml"], ["agents={sovler: {lr: 1.0e-5}}"])
    with pytest.raises(ConfigError, match=r"^config: agents\.sovler: no MAS has an agent 'sovler'; known: ") as err:
        check_agents_exist(cfg)
    assert "\n" not in str(err.value)
    suites = {s: load_suite(suite_path(s, ROOT / "benchmarks")) for s in cfg.suites}
    with pytest.raises(ConfigError, match=r"agents\.sovler: no configured suite has an agent 'sovler'"):
        check_suites(cfg, suites, ROOT / "benchmarks")
    check_agents_exist(workflow_config([ROOT / "config" / "default.yaml"], ["agents={critic: {lr: 1.0e-5}}"]))


def test_command_line_values_are_read_as_yaml_and_coerced():
    from drmas.config.profile import workflow_config

    cfg = workflow_config([ROOT / "config" / "default.yaml"],
                          ["seeds=[0,1,2]", "eval={n: 8}", "train={lr: 5e-4}"])
    assert cfg.seeds == [0, 1, 2] and cfg.eval.n == 8 and cfg.train.lr == 5e-4
    assert cfg.eval.temperature == 0.6                  # a nested override merges, not replaces


def test_benchmark_files_are_validated_by_their_schema(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nmas: math\nagents: [solver]\nreward: math\ninvalid_penalty: 2\n"
                   "datasets: {default: {kind: generated}}\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: invalid_penalty: 2 is greater than the maximum of 1"):
        load_suite(bad)
    bad.write_text("name: x\nagents: [solver\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml:\d+:\d+: not valid YAML"):
        load_suite(bad)


def test_named_methods_carry_an_estimator_and_train_settings(tmp_path):
    """The paper's ablations as configuration: a method = an estimator + train keys, which
    win over the profile's, the suite's and per-agent values (the command line still wins
    over a method: tests/config/test_layers.py); its run identity differs."""
    from drmas.config.profile import workflow_config
    from drmas.config.stages import train_key

    agents = tmp_path / "agents.yaml"       # a second profile file: a per-agent value
    agents.write_text("agents: {solver: {grad_clip: 0.5}}\n")
    cfg = workflow_config([ROOT / "config" / "default.yaml", agents], [
        "method_defs={grpo_clip0.1: {estimator: grpo, label: 'GRPO, clip 0.1', train: {grad_clip: 0.1}}}",
        "methods=[grpo,drmas,grpo_clip0.1]", "assignments=[nonshared]"])
    run = cfg.for_suite("math").for_method("grpo_clip0.1")
    assert run.agent_train("solver").grad_clip == 0.1 and run.agent_train("verifier").grad_clip == 0.1
    assert cfg.for_suite("math").agent_train("solver").grad_clip == 0.5
    assert cfg.method("grpo_clip0.1").estimator == "grpo" and cfg.label_of("drmas") == "Dr. MAS"
    assert cfg.label_of("grpo_clip0.1") == "GRPO, clip 0.1"
    suite = load_suite(ROOT / "benchmarks" / "math.yaml")
    plain, clipped = (train_key(cfg, suite, "nonshared", m, 0) for m in ("grpo", "grpo_clip0.1"))
    assert plain["estimator"] == clipped["estimator"] == "grpo"
    assert plain["train"]["verifier"]["grad_clip"] == 1.0 and clipped["train"]["verifier"]["grad_clip"] == 0.1
    with pytest.raises(ConfigError, match="methods: 'ppo' is neither an estimator"):
        workflow_config([ROOT / "config" / "default.yaml"], ["methods=[grpo,ppo]"])
