"""Lists that name runs or jobs refuse duplicates; every name that becomes part of a path is
one plain name (`schema.NAME_PATTERN`); every agent name of a profile, assignments included,
resolves against the suites' MAS; `retrieval.jvm_heap` is a size a JVM starts with."""

import pytest

from drmas.config.profile import workflow_config
from drmas.config.suites import check_agents_exist, check_suites, load_suite, suite_path
from drmas.errors import ConfigError
from repo import REPO as ROOT

DEFAULT = [ROOT / "config" / "default.yaml"]


@pytest.mark.parametrize("override, message", [
    ("seeds=[0,1,0]", r"^config: seeds: 0 is listed twice"),
    ("methods=[grpo,drmas,grpo]", r"^config: methods: 'grpo' is listed twice"),
    ("assignments=[shared,shared]", r"^config: assignments: 'shared' is listed twice"),
    ("suites=[math,math]", r"^config: suites: 'math' is listed twice"),
    ("suite_overrides={math: {methods: [grpo, grpo]}}", r"suite_overrides\.math\.methods: 'grpo' is listed twice"),
])
def test_a_repeated_entry_is_refused(override, message):
    with pytest.raises(ConfigError, match=message) as err:
        workflow_config(DEFAULT, [override])
    assert "\n" not in str(err.value)


def test_snakemake_string_seeds_are_coerced_before_the_duplicate_check():
    with pytest.raises(ConfigError, match=r"seeds: 0 is listed twice"):
        workflow_config(DEFAULT, ["seeds=['0', '1', '0']"])


def test_a_suites_repeated_agent_is_refused(tmp_path):
    text = (ROOT / "benchmarks" / "math.yaml").read_text()
    path = tmp_path / "math.yaml"
    path.write_text(text.replace("agents: [solver, verifier]", "agents: [solver, verifier, solver]"))
    assert path.read_text() != text
    with pytest.raises(ConfigError, match=r"agents: 'solver' is listed twice"):
        load_suite(path)


@pytest.mark.parametrize("override, where", [
    ("assignment_defs={../search/shared: {share: true, models: {default: small}}}", "assignment_defs"),
    ("method_defs={..: {estimator: grpo}}", "method_defs"),
    ("methods=[grpo, ../x]", r"methods\.1"),
    ("models={a/b: {kind: pretrained, path: x}}", "models"),
    ("agents={.hidden: {lr: 0.1}}", "agents"),
    ("suites=[../math]", r"suites\.0"),
])
def test_a_name_with_path_characters_is_refused(override, where):
    with pytest.raises(ConfigError, match=rf"^config: {where}: .* is not a plain name .*it becomes "
                                          "part of a path$"):
        workflow_config(DEFAULT, [override])


def test_dotted_method_names_still_pass():
    cfg = workflow_config(DEFAULT, ["method_defs={grpo_clip0.1: {estimator: grpo, train: {grad_clip: 0.1}}}",
                                    "methods=[grpo, grpo_clip0.1]"])
    assert cfg.methods == ["grpo", "grpo_clip0.1"]


def test_an_assignment_agent_no_suite_has_is_refused_at_parse_time():
    cfg = workflow_config(DEFAULT, ["assignment_defs={shared: {share: true, models: {default: small}}, "
                                    "nonshared: {share: false, models: {default: small}}, "
                                    "hetero: {share: false, models: {default: small, answrer: medium}}}"])
    suites = {s: load_suite(suite_path(s, ROOT / "benchmarks")) for s in cfg.suites}
    with pytest.raises(ConfigError, match=r"^config: assignment_defs\.hetero\.models\.answrer: no "
                                          r"MAS has an agent 'answrer'"):
        check_suites(cfg, suites, ROOT / "benchmarks")
    with pytest.raises(ConfigError, match=r"assignment_defs\.hetero\.models\.answrer: no MAS has"):
        check_agents_exist(cfg)
    default = workflow_config(DEFAULT, [])         # solver, answerer: both exist
    check_suites(default, {s: load_suite(suite_path(s, ROOT / "benchmarks")) for s in default.suites},
                 ROOT / "benchmarks")
    # one assignment serves every suite: with math alone, hetero's Answerer is unused, not wrong
    math_only = workflow_config(DEFAULT, ["suites=[math]"])
    check_suites(math_only, {"math": load_suite(suite_path("math", ROOT / "benchmarks"))},
                 ROOT / "benchmarks")


@pytest.mark.parametrize("heap", ["0", "1k", "99999999999999g", "0g"])
def test_a_jvm_heap_no_jvm_starts_with_is_a_config_error(heap):
    with pytest.raises(ConfigError, match=r"^config: retrieval\.jvm_heap: "):
        workflow_config(DEFAULT, [f"retrieval={{jvm_heap: '{heap}'}}"])


def test_n_boot_has_a_maximum():
    with pytest.raises(ConfigError, match=r"report\.n_boot: 1000000 is greater than the maximum"):
        workflow_config(DEFAULT, ["report={n_boot: 1000000}"])
