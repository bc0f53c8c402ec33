"""Every name a benchmark file gives is resolved when it is loaded (so when the workflow
parses), not when the first job reaches it: the MAS, the reward, a generator, a hub or
packaged source, a corpus. One line naming the file and the key."""

import subprocess
import time

import pytest
import yaml

from drmas.config.suites import load_suite
from drmas.errors import ConfigError
from repo import REPO, copy_workflow, snakemake_bin, workflow_env


def with_change(tmp_path, suite: str, change) -> str:
    raw = yaml.safe_load((REPO / "benchmarks" / f"{suite}.yaml").read_text())
    change(raw)
    path = tmp_path / f"{suite}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def hub_math(raw):
    raw["datasets"]["x"] = {"kind": "hub", "train": [{"source": "dapo"}],
                            "test": [{"source": "math500", "path": "bundled"}]}


CASES = [
    ("math", lambda r: r.update(reward="nosuch_reward"),
     r"reward: unknown reward 'nosuch_reward'; known: arithmetic, math, qa$"),
    ("math", lambda r: r.update(mas="nosuch_mas"), r"mas: unknown MAS 'nosuch_mas'; known: .*math"),
    ("math", lambda r: r["datasets"]["default"].update(generator="arithmetix"),
     r"datasets\.default\.generator: unknown generator 'arithmetix'; known: arithmetic"),
    ("math", lambda r: r["datasets"].update(x={"kind": "hub", "test": [{"source": "math5000"}]}),
     r"datasets\.x\.test\[0\]\.source: unknown dataset 'math5000'; known: .*math500.* \(or give a local path:\)$"),
    ("math", lambda r: r["datasets"].update(x={"kind": "hub", "test": [{"source": "gsm9k", "path": "package"}]}),
     r"datasets\.x\.test\[0\]\.source: unknown packaged dataset 'gsm9k'; known: .*gsm8k"),
    ("search", lambda r: r["datasets"].update(x={"kind": "hub", "test": [{"source": "nq", "path": "q.jsonl"}],
                                                 "corpus": {"source": "wiki81"}}),
     r"datasets\.x\.corpus\.source: unknown corpus 'wiki81'; known: wiki18 \(or give a local path:, or path: package\)$"),
    ("search", lambda r: r["datasets"].update(x={"kind": "hub", "test": [{"source": "nq", "path": "q.jsonl"}],
                                                 "corpus": {"source": "wiki", "path": "package"}}),
     r"datasets\.x\.corpus\.source: unknown packaged corpus 'wiki'; known: wiki_offline"),
]


@pytest.mark.parametrize("suite,change,message", CASES)
def test_an_unknown_name_is_one_line_naming_the_key(tmp_path, suite, change, message):
    path = with_change(tmp_path, suite, change)
    with pytest.raises(ConfigError, match=rf"^{path}: {message}") as err:
        load_suite(path)
    assert "\n" not in str(err.value)


def test_known_names_and_local_files_pass(tmp_path):
    for suite in ("math", "search", "math4"):
        load_suite(REPO / "benchmarks" / f"{suite}.yaml")
    # a local file may carry any name: its records are read as they are
    path = with_change(tmp_path, "math", lambda r: r["datasets"].update(
        x={"kind": "hub", "test": [{"source": "my_own_set", "path": "mine.jsonl"}]}))
    assert load_suite(path).datasets["x"]["test"][0]["source"] == "my_own_set"
    hub = with_change(tmp_path, "math", hub_math)
    assert load_suite(hub).datasets["x"]["train"] == [{"source": "dapo"}]


def test_an_unknown_reward_stops_a_dry_run_in_one_line(tmp_path):
    workflow = copy_workflow(tmp_path / "wf")
    suite = workflow / "benchmarks" / "math.yaml"
    suite.write_text(suite.read_text().replace("reward: math", "reward: nosuch_reward"))
    assert "nosuch_reward" in suite.read_text()
    start = time.monotonic()
    proc = subprocess.run([snakemake_bin(), "-n"], cwd=workflow, env=workflow_env(),
                          capture_output=True, text=True, timeout=120)
    assert time.monotonic() - start < 60
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    errors = [l for l in proc.stderr.splitlines() if l.startswith("drmas config error")]
    assert len(errors) == 1, proc.stderr[-2000:]
    assert errors[0].endswith("math.yaml: reward: unknown reward 'nosuch_reward'; known: arithmetic, math, qa")
