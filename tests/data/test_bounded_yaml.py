"""YAML from a user is read within bounds (drmas/data/bounded_yaml.py): an alias bomb, a
too-deep or too-large document is one ConfigError line naming the file, within seconds and in
bounded memory, for profiles, benchmark files and `--config` values alike."""

import subprocess
import time
import tracemalloc

import pytest
import yaml

from drmas.config.layers import parse_overrides
from drmas.config.profile import load
from drmas.config.suites import load_suite
from drmas.data.bounded_yaml import MAX_BYTES, MAX_NODES, expanded_size, load_bounded
from drmas.data.io import read_yaml
from drmas.errors import ConfigError
from repo import REPO, copy_workflow, snakemake_bin, workflow_env


def bomb(levels: int = 9, width: int = 10, indent: str = "") -> str:
    """Nested aliases: `levels` levels of `width` references each (width**levels leaves)."""
    lines = [f"{indent}l0: &l0 [" + ", ".join(["x"] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"{indent}l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def refused_quickly(fn, match, traced=True):
    """`fn()` raises a one-line ConfigError matching `match` in under 5 s (a first call) and
    within 50 MB of Python allocations (a second call, traced, unless `traced` is false:
    tracemalloc makes PyYAML's recursion on a deep document take 20 s)."""
    start = time.monotonic()
    with pytest.raises(ConfigError, match=match) as err:
        fn()
    assert time.monotonic() - start < 5
    assert "\n" not in str(err.value)
    if not traced:
        return str(err.value)
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError, match=match):
            fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 50 * 2**20
    return str(err.value)


def test_expanded_size_counts_every_alias_as_a_copy():
    # a mapping of 2 keys: the first a list of 3 scalars, the second 4 aliases of that list
    node = yaml.compose("a: &a [1, 2, 3]\nb: [*a, *a, *a, *a]\n")
    list_size = 1 + 3
    assert expanded_size(node) == 1 + (1 + list_size) + (1 + 1 + 4 * list_size)
    assert expanded_size(yaml.compose(bomb(3, 10))) == 1 + 3 + (1 + 10) + (1 + 10 * 11) + (1 + 10 * 111)


def test_an_ordinary_document_loads_as_pyyaml_loads_it():
    text = (REPO / "config" / "default.yaml").read_text()
    assert load_bounded(text, "default.yaml") == yaml.safe_load(text)
    small = "base: &b {lr: 1.0e-3, steps: 4}\nother: *b\n"      # a modest anchor is fine
    assert load_bounded(small, "x") == {"base": {"lr": 1.0e-3, "steps": 4}, "other": {"lr": 1.0e-3, "steps": 4}}
    assert load_bounded("", "x") is None


def test_a_profile_alias_bomb_is_refused(tmp_path):
    profile = tmp_path / "bomb.yaml"
    profile.write_text((REPO / "config" / "default.yaml").read_text() + "\nextra:\n" + bomb(indent="  "))
    line = refused_quickly(lambda: load(profile), rf"^{profile}: expands to [\d,]+ YAML nodes")
    assert f"more than {MAX_NODES:,}" in line


def test_a_benchmark_file_alias_bomb_is_refused(tmp_path):
    suite = tmp_path / "math.yaml"
    suite.write_text((REPO / "benchmarks" / "math.yaml").read_text() + "\n" + bomb())
    refused_quickly(lambda: load_suite(suite), rf"^{suite}: expands to")


def test_a_command_line_alias_bomb_is_refused():
    value = "{" + bomb(8, 10).replace("\n", ", ").rstrip(", ") + "}"
    refused_quickly(lambda: parse_overrides([f"train={value}"]), r"^override train=\.\.\.: expands to")


def test_too_deep_and_too_large_documents_are_one_line(tmp_path):
    deep = tmp_path / "deep.yaml"
    deep.write_text("seeds: " + "[" * 1500 + "]" * 1500 + "\n")
    refused_quickly(lambda: read_yaml(deep), rf"^{deep}: YAML nested too deeply", traced=False)
    large = tmp_path / "large.yaml"
    large.write_text("notes: '" + "x" * MAX_BYTES + "'\n")
    refused_quickly(lambda: read_yaml(large), rf"^{large}: [\d,]+ characters of YAML, more than")


def test_snakemake_dry_run_refuses_a_bomb_profile_in_one_line(tmp_path):
    workflow = copy_workflow(tmp_path / "wf")
    profile = workflow / "config" / "bomb.yaml"
    profile.write_text((workflow / "config" / "default.yaml").read_text() + "\nextra:\n" + bomb(indent="  "))
    start = time.monotonic()
    proc = subprocess.run([snakemake_bin(), "-n", "--configfile", "config/bomb.yaml"], cwd=workflow,
                          env=workflow_env(), capture_output=True, text=True, timeout=120)
    assert time.monotonic() - start < 60
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    errors = [l for l in proc.stderr.splitlines() if l.startswith("drmas config error")]
    assert len(errors) == 1 and "expands to" in errors[0], proc.stderr[-2000:]
