"""The Snakemake workflow: lint-clean, suites discovered from benchmarks/, one-line config
errors. Runs in a copy of the workflow files so the repository is never written to."""

import pytest
import yaml

from repo import REPO as ROOT, copy_workflow, snakemake


@pytest.fixture
def workflow(tmp_path):
    return copy_workflow(tmp_path)


def test_lint_has_no_findings(workflow):
    proc = snakemake(workflow, "--lint")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Congratulations" in proc.stdout + proc.stderr


def test_new_suite_file_appears_in_dry_run(workflow):
    spec = yaml.safe_load((workflow / "benchmarks" / "math.yaml").read_text())
    spec["name"] = "arith_hard"
    spec["datasets"]["default"]["sources"] = {"arith-3": {"level": 3}}
    (workflow / "benchmarks" / "arith_hard.yaml").write_text(yaml.safe_dump(spec))
    proc = snakemake(workflow, "-n", "--config", "suites=[math,arith_hard]")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    for target in ("results/default/tables/arith_hard.md", "results/default/data/arith_hard/train.jsonl",
                   "results/default/evals/arith_hard/hetero/drmas/seed0/scores.json",
                   "results/default/figures/arith_hard_theory_check.png",
                   "results/default/tables/math.md"):
        assert target in out, target


def test_default_dry_run_job_counts(workflow):
    proc = snakemake(workflow, "-n", "--quiet", "rules")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    counts = job_counts(out)
    # (math: 2 assignments + search: 3) x 2 methods x 3 seeds; base models at seed 0 only;
    # small per suite + medium for search's hetero
    assert counts["train"] == 30 and counts["evaluate_run"] == 30 and counts["evaluate_base"] == 5
    assert counts["warmstart"] == 3 and counts["index"] == 1 and counts["prepare"] == 2


def rule_blocks(out: str) -> dict[str, list[str]]:
    """{rule: [its jobs' blocks]} of a dry run's output."""
    blocks = {}
    for block in out.split("\nrule ")[1:]:
        blocks.setdefault(block.split(":", 1)[0], []).append(block)
    return blocks


def field_line(block: str, field: str) -> str:
    """The `field:` line (input, output, log, ...) of a dry run's job block."""
    return next(l for l in block.splitlines() if l.strip().startswith(f"{field}:"))


def job_counts(out: str) -> dict:
    return {line.split()[0]: int(line.split()[1]) for line in out.splitlines()
            if len(line.split()) == 2 and line.split()[1].isdigit()}


@pytest.mark.parametrize("args,expect", [
    (["--config", "seeds=[0]"], {"train": 10, "evaluate_base": 5, "warmstart": 3}),
    (["--config", "eval={n: 8}"], {"train": 30, "evaluate_run": 30}),
    (["--config", "train={lr: 5.0e-4}", "seeds=[0,1]"], {"train": 20}),
    (["--config", "suites=[search]", "assignments=[shared]"], {"train": 6, "warmstart": 1}),
    (["--config", "suites=[math]", "suite_overrides={math: {assignments: [nonshared]}}"],
     {"train": 6, "evaluate_base": 1}),
])
def test_readme_config_overrides_work(workflow, args, expect):
    """The README's `--config` examples: lists and nested keys, values read as YAML."""
    proc = snakemake(workflow, "-n", "--quiet", "rules", *args)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    counts = job_counts(out)
    assert {k: counts[k] for k in expect} == expect


def test_dry_run_writes_nothing_under_results(workflow):
    proc = snakemake(workflow, "-n")
    assert proc.returncode == 0, proc.stderr
    assert not (workflow / "results").exists() or not any((workflow / "results").rglob("*"))


def test_paper_profile_stands_alone(workflow):
    """Loaded the Snakefile's way (`workflow_config`), config/paper.yaml gets nothing from
    config/default.yaml: every key only the default profile sets is absent from the paper's
    resolved config or holds the drmas default there."""
    from drmas.config.profile import DEFAULT_PROFILE, workflow_config
    from drmas.config.layers import read_profiles
    from drmas.config.show import resolve_with_sources, source_of

    paper = workflow_config([ROOT / "config" / "paper.yaml"], []).resolved()
    _, default_sets = read_profiles([ROOT / DEFAULT_PROFILE])
    _, paper_sets = read_profiles([ROOT / "config" / "paper.yaml"])
    only_default = [k for k in default_sets if k not in paper_sets]
    assert "train.lr" in only_default and "suite_overrides.search.train.steps" in only_default
    _, sources = resolve_with_sources([ROOT / "config" / "paper.yaml"])
    for key in only_default:
        node = paper
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        assert node is None or source_of(key, sources) == "default", key
    assert paper["train"]["lr"] == 1e-6 and paper["suite_overrides"]["search"]["train"]["group_n"] == 5
    assert "steps" not in paper["suite_overrides"]["search"]["train"]      # default.yaml's 10
    proc = snakemake(workflow, "-n", "--quiet", "rules", "--configfile", "config/paper.yaml")
    assert proc.returncode == 0, proc.stderr
    assert "extended by additional config" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("override,fragment", [
    ("train={'lr': 'fast'}", "'fast' is not of type 'number'"),
    ("suites=[nosuch]", "benchmark file not found"),
    ("seeds=[0,x]", "seeds.1: 'x' is not of type 'integer'"),
    ("agents={solver: {group_n: 4}}", "agents.solver.group_n: a run-wide key"),
    ("agents={sovler: {lr: 1.0e-5}}", "agents.sovler: no configured suite has an agent 'sovler'"),
    ("suite_overrides={nosuch: {train: {steps: 2}}}", "suite_overrides.nosuch: no benchmark 'nosuch'"),
    ("train={lr: .nan}", "train.lr: nan is not a finite number"),
    ("train={group_n: 2.0}", "train.group_n: 2.0 is not of type 'integer'"),
    ("models={small: {kind: pretrained}}", "models.small: a pretrained model needs a path"),
])
def test_bad_config_is_one_line(workflow, override, fragment):
    proc = snakemake(workflow, "-n", "--config", override)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    errors = [l for l in proc.stderr.splitlines() if l.startswith("drmas config error")]
    assert len(errors) == 1 and fragment in errors[0], proc.stderr


def test_benchmark_yaml_syntax_error_names_the_file(workflow):
    (workflow / "benchmarks" / "math.yaml").write_text("name: math\nagents: [solver\n")
    proc = snakemake(workflow, "-n")
    errors = [l for l in proc.stderr.splitlines() if l.startswith("drmas config error")]
    assert proc.returncode != 0 and len(errors) == 1 and "Traceback" not in proc.stderr
    assert "benchmarks/math.yaml:" in errors[0] and "not valid YAML" in errors[0]


def test_paper_profile_lists_the_papers_runs_with_their_gpus(workflow):
    """The paper's matrix: math (Qwen3-4B/8B) and search (Qwen2.5-3B/7B) shared / not shared,
    plus the heterogeneous search assignment, each with Dr. MAS and both upstream GRPOs: 27
    runs (the paper's 18 and their `grpo_2025` twins); every training job asks for the pool's
    GPUs, every evaluation for one."""
    proc = snakemake(workflow, "-n", "--configfile", "config/paper.yaml")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    counts = job_counts(out)
    assert counts["train"] == 27 and counts["evaluate_run"] == 27
    assert counts["evaluate_base"] == 4 + 5                 # one per assignment and suite
    blocks = out.split("\nrule ")[1:]
    gpus = {}
    for block in blocks:
        rule = block.split(":", 1)[0]
        res = next((l for l in block.splitlines() if l.strip().startswith("resources:")), "")
        gpus.setdefault(rule, set()).add(next((p.split("=")[1] for p in res.replace(",", " ").split()
                                               if p.startswith("gpu=")), None))
    assert gpus["train"] == {"4"} and gpus["evaluate_run"] == {"1"} and gpus["prepare"] == {"0"}
    runs = {l.split("runs/")[1] for l in out.splitlines() if "output: results/paper/runs/" in l}
    assert {r.split("/")[1] for r in runs if r.startswith("search/")} == {
        "shared_3b", "nonshared_3b", "shared_7b", "nonshared_7b", "hetero"}
    assert {r.split("/")[1] for r in runs if r.startswith("math/")} == {
        "shared_4b", "nonshared_4b", "shared_8b", "nonshared_8b"}
    assert {r.split("/")[2] for r in runs} == {"grpo", "grpo_2025", "drmas"}


def test_smol_profile_converts_then_warm_starts_the_model_before_its_jobs(workflow):
    """config/smol.yaml: SmolLM2 converted from GGUF by one job, then warm-started once per
    suite from the converted folder (no tokenizer job: it brings its own); every training run
    and base evaluation of a suite loads that suite's warm-started model, not the converted
    one; both suites x shared / not shared x GRPO / Dr. MAS."""
    proc = snakemake(workflow, "-n", "--configfile", "config/smol.yaml")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    counts = job_counts(out)
    assert counts["convert_model"] == 1 and counts["prepare"] == 2 and counts["index"] == 1
    assert counts["train"] == 8 and counts["evaluate_run"] == 8 and counts["evaluate_base"] == 4
    assert counts["warmstart"] == 2 and "tokenizer" not in counts
    converted = "results/smol/models/smollm2-135m-instruct"
    blocks = rule_blocks(out)
    (convert,) = blocks["convert_model"]
    assert f"output: {converted}\n" in convert
    assert "log: results/smol/logs/convert/smollm2-135m-instruct.log" in convert
    assert {field_line(b, "output").split()[-1] for b in blocks["warmstart"]} == {
        "results/smol/models/math/smollm2", "results/smol/models/search/smollm2"}
    for block in blocks["warmstart"]:
        assert converted in field_line(block, "input") and "tokenizer" not in block
    for rule in ("train", "evaluate_base"):
        for block in blocks[rule]:
            suite = "math" if "/math/" in field_line(block, "output") else "search"
            inputs = field_line(block, "input")
            assert f"results/smol/models/{suite}/smollm2" in inputs and converted not in inputs
    runs = {l.split("runs/")[1] for l in out.splitlines() if "output: results/smol/runs/" in l}
    assert runs == {f"{s}/{a}/{m}/seed0" for s in ("math", "search")
                    for a in ("shared", "nonshared") for m in ("grpo", "drmas")}


def test_a_pretrained_model_without_a_warmstart_block_is_used_as_it_is(workflow):
    """config/smol.yaml without `models.smollm2.warmstart`: no warm start; every training run
    and base evaluation loads the converted model itself."""
    raw = yaml.safe_load((workflow / "config" / "smol.yaml").read_text())
    del raw["models"]["smollm2"]["warmstart"]
    (workflow / "config" / "smol_plain.yaml").write_text(yaml.safe_dump(raw))
    proc = snakemake(workflow, "-n", "--configfile", "config/smol_plain.yaml")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    counts = job_counts(out)
    assert counts["convert_model"] == 1 and "warmstart" not in counts and "tokenizer" not in counts
    for rule in ("train", "evaluate_base"):
        for block in rule_blocks(out)[rule]:
            assert "results/smol/models/smollm2-135m-instruct" in field_line(block, "input"), rule