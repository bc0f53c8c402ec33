"""The command line is the last layer (ARCHITECTURE.md, "Configuration"): what a user types
with `--config KEY=VALUE` wins over the profile, over `suite_overrides.<suite>` and over a
method's `method_defs.<name>.train`, for every suite's jobs, and `drmas config show` says so."""

import pytest

from drmas.config.profile import load, workflow_config
from drmas.config.show import show
from repo import REPO

DEFAULT = REPO / "config" / "default.yaml"
ABLATIONS = REPO / "config" / "ablations.yaml"


def shown(text: str, section: str, key: str) -> str:
    """The line of `key` directly under the top-level `section` of `drmas config show`."""
    lines = text.splitlines()
    start = lines.index(f"{section}:") + 1
    block = []
    for line in lines[start:]:
        if not line.startswith("  "):
            break
        block.append(line)
    return next(line for line in block if line.startswith(f"  {key}:"))


def test_the_profile_overrides_search_steps_so_the_tests_below_can_fail():
    cfg = workflow_config([DEFAULT], [])
    assert cfg.train.steps != 16 and cfg.for_suite("search").train.steps == 16
    assert cfg.for_suite("math").assignments == ["shared", "nonshared"]


def test_command_line_train_key_reaches_every_suite():
    cfg = workflow_config([DEFAULT], ["train={steps: 20}"])
    assert cfg.train.steps == 20
    for suite in ("math", "search"):
        scfg = cfg.for_suite(suite)
        assert scfg.train.steps == 20, suite
        assert all(scfg.for_method(m).train.steps == 20 for m in scfg.methods)
    # what the command line does not name still comes from the suite's overrides
    assert cfg.for_suite("search").train.group_n == 5


def test_command_line_assignments_beat_a_suites_own():
    cfg = workflow_config([DEFAULT], ["assignments=[nonshared]"])
    assert cfg.for_suite("math").assignments == ["nonshared"]
    assert cfg.for_suite("search").assignments == ["nonshared"]


def test_command_line_suite_override_is_more_specific_than_its_plain_key():
    cfg = workflow_config([DEFAULT], ["train={steps: 20}", "suite_overrides={search: {train: {steps: 3}}}"])
    assert cfg.for_suite("math").train.steps == 20
    assert cfg.for_suite("search").train.steps == 3
    assert cfg.for_suite("search").train.group_n == 5       # the profile's override, kept


def test_command_line_beats_a_methods_train_keys():
    plain = load(ABLATIONS).for_suite("math")
    assert plain.for_method("grpo_clip0.1").train.grad_clip == pytest.approx(0.1)
    typed = load(ABLATIONS, ["train={grad_clip: 0.5}"]).for_suite("math")
    assert typed.for_method("grpo_clip0.1").train.grad_clip == pytest.approx(0.5)
    assert typed.for_method("drmas_nostd").train.norm_by_std is False    # untouched keys stay
    agents = {a: typed.for_method("grpo_clip0.1").agent_train(a).grad_clip for a in ("solver", "verifier")}
    assert agents == {"solver": pytest.approx(0.5), "verifier": pytest.approx(0.5)}


def test_config_show_names_the_command_line_as_the_source():
    text = show([str(DEFAULT)], ["train={steps: 20}"], suite="search")
    line = shown(text, "train", "steps")
    assert line.split("#")[0].split() == ["steps:", "20"] and line.endswith("# command line")
    # a key the command line leaves alone still names the suite's override
    assert shown(text, "train", "group_n").endswith("# suite_overrides.search")
    text = show([str(DEFAULT)], [], suite="search")
    assert shown(text, "train", "steps").endswith("# suite_overrides.search")


def test_a_resolved_config_is_built_once_per_suite_and_method():
    cfg = workflow_config([DEFAULT], ["train={steps: 20}"])
    assert cfg.for_suite("search") is cfg.for_suite("search")
    scfg = cfg.for_suite("search")
    assert scfg.for_suite("search") is scfg
