"""CPU kernels (drmas/models/kernels.py): `cpu_kernels: avx2` pins PyTorch's, MKL's and
oneDNN's code paths before torch runs, the pin wins over an inherited variable, the kernels
change float32 results (the reason for the pin), and the pinned setting is part of the run
identity while `native` leaves earlier keys as they were."""

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from repo import REPO as ROOT
from drmas.config.profile import load, workflow_config
from drmas.config.stages import eval_key, train_key, warmstart_key
from drmas.config.suites import load_suite
from drmas.errors import ConfigError
from drmas.models import kernels

HAS_AVX2 = torch.backends.cpu.get_cpu_capability().startswith(("AVX2", "AVX512"))


@pytest.fixture
def clean_env(monkeypatch):
    """The pinned variables unset here (conftest restores them after the test)."""
    for name in kernels.AVX2:
        monkeypatch.delenv(name, raising=False)


def test_pin_sets_each_librarys_variable_and_native_sets_none(clean_env):
    kernels.pin("native")
    assert not [n for n in kernels.AVX2 if n in os.environ]
    kernels.pin("avx2")
    assert {n: os.environ[n] for n in kernels.AVX2} == {
        "ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        "ONEDNN_MAX_CPU_ISA": "AVX2"}
    with pytest.raises(ConfigError, match="cpu_kernels 'avx512': one of native, avx2"):
        kernels.pin("avx512")


def test_the_command_line_pins_the_profiles_kernels(clean_env, tmp_path):
    """`drmas <command> --config P` pins P's `cpu_kernels` before the command runs; a
    command's own `--cpu-kernels` wins; a native profile leaves the environment alone."""
    from drmas.cli.job import pin_cpu_kernels

    native = tmp_path / "native.yaml"
    native.write_text((ROOT / "config" / "default.yaml").read_text().replace(
        "cpu_kernels: avx2", "cpu_kernels: native"))
    pin_cpu_kernels(SimpleNamespace(config=str(native)))
    assert "ATEN_CPU_CAPABILITY" not in os.environ
    pin_cpu_kernels(SimpleNamespace(config=str(native), cpu_kernels="avx2"))
    assert os.environ["ATEN_CPU_CAPABILITY"] == "avx2"
    os.environ.pop("ATEN_CPU_CAPABILITY")
    pin_cpu_kernels(SimpleNamespace(config=str(ROOT / "config" / "default.yaml")))
    assert os.environ["ATEN_CPU_CAPABILITY"] == "avx2"


def test_check_refuses_wider_kernels_than_pinned_and_warns_without_avx2(monkeypatch, capsys):
    monkeypatch.setattr(kernels, "in_use", lambda: "AVX512")
    with pytest.raises(ConfigError, match="already runs AVX512 kernels"):
        kernels.check("avx2")
    assert kernels.check("native") == "cpu kernels: AVX512 (cpu_kernels: native)"
    monkeypatch.setattr(kernels, "in_use", lambda: "DEFAULT")
    assert kernels.check("avx2") == "cpu kernels: DEFAULT (cpu_kernels: avx2)"
    assert "this CPU runs DEFAULT kernels, not AVX2" in capsys.readouterr().err


def _numerics(*args, **env):
    proc = subprocess.run([sys.executable, "-m", "drmas.cli", "check", "numerics", *args],
                          capture_output=True, text=True, timeout=600, cwd=ROOT,
                          env={**os.environ, **env})
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = dict(line.split(": ", 1) for line in proc.stdout.splitlines() if ": " in line)
    return lines["fingerprint"], lines["cpu kernels"]


@pytest.mark.skipif(not HAS_AVX2, reason="the pin is to AVX2: this CPU has none")
def test_kernels_change_float32_training_and_the_pin_wins():
    """Three fingerprints (30 float32 AdamW steps of the default small shape): pinned, pinned
    under an inherited ATEN_CPU_CAPABILITY=default, and that variable left to act (PyTorch's
    unvectorised kernels). The first two are equal bit for bit; the third differs."""
    pinned, used = _numerics()
    assert used == "AVX2 (cpu_kernels: avx2)"
    assert _numerics(ATEN_CPU_CAPABILITY="default") == (pinned, used)
    scalar, used = _numerics("--cpu-kernels", "native", ATEN_CPU_CAPABILITY="default")
    assert used == "DEFAULT (cpu_kernels: native)" and scalar != pinned
    assert len(pinned) == 16 and int(pinned, 16) >= 0


def test_pinned_kernels_are_part_of_the_run_identity_native_keys_unchanged():
    suite = load_suite(ROOT / "benchmarks" / "math.yaml")
    pinned = load(ROOT / "config" / "default.yaml")
    assert pinned.cpu_kernels == "avx2"
    native = workflow_config([ROOT / "config" / "default.yaml"], ["cpu_kernels=native"])
    keys = [lambda c: warmstart_key(c, suite, "small"),
            lambda c: train_key(c, suite, "shared", "grpo", 0),
            lambda c: eval_key(c, suite, "shared", "base", 0)]
    for key in keys:
        a, b = key(pinned), key(native)
        assert a["cpu_kernels"] == "avx2" and "cpu_kernels" not in json.dumps(b)
        assert {k: v for k, v in a.items() if k != "cpu_kernels"} == b
