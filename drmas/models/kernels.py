"""Which CPU kernels compute: each library's best for this CPU (`native`) or AVX2 on every x86
CPU (`avx2`), so that a float32 run gives the same bits on AVX2 and AVX-512 machines.

Float32 arithmetic on a CPU is not the same everywhere. PyTorch's own kernels (element-wise
ops, reductions, softmax, the CPU flash attention) are compiled for several instruction sets
and pick the widest the CPU has; MKL (matrix products) and oneDNN choose their code paths by
CPU too. A wider vector sums in another order, so the last bits of a result differ, and over
hundreds of warm-start steps those bits grow into another model: the default profile's search
base model scored 81.0 avg@16 on an AVX2-only EPYC and 91.9 on an AVX-512 one, both float32
(docs/results.md). `cpu_kernels: avx2` asks each library for its AVX2 code on every CPU that
has AVX2 (x86 CPUs since about 2013), through the variables each reads once per process, at
its first use:

- `ATEN_CPU_CAPABILITY=avx2`: PyTorch's kernels;
- `MKL_ENABLE_INSTRUCTIONS=AVX2`: MKL's instruction set (on an AMD EPYC MKL names its generic
  path, "Intel(R) Architecture processors", and the fingerprint is unchanged by it);
- `ONEDNN_MAX_CPU_ISA=AVX2`: oneDNN's (bf16 matrix products; float32 ones go to MKL).

Not `MKL_CBWR` (MKL's reproducibility mode): `MKL_CBWR=AVX2` makes MKL compute some products
differently from its default mode even on an AVX2-only AMD CPU (an RL step of
tests/train/test_pool.py changed under it), so it would move the numbers measured without it.

They must be set before torch runs its first kernel, so the command line sets them before it
dispatches a command (`pin`); `check` then confirms that PyTorch took its AVX2 kernels. What
this does not make equal: an Intel CPU against an AMD one (MKL's Intel paths against its
generic one), Intel CPUs of different generations (MKL may tune its AVX2 code per CPU),
another torch or MKL build, another thread count. `drmas check numerics`
prints a fingerprint to compare two machines. On an AVX2-only CPU `avx2` is what `native`
runs anyway (same bits, same speed); elsewhere it gives up AVX-512's width in PyTorch's own
kernels, a small part of a tiny model's time (its matrix products are MKL's).
"""

from __future__ import annotations

import os
import platform

from drmas.errors import ConfigError

CPU_KERNELS = ("native", "avx2")
#: the variables `avx2` sets, each library's own
AVX2 = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        "ONEDNN_MAX_CPU_ISA": "AVX2"}


def pin(setting: str) -> None:
    """Set the variables of `setting` in this process's environment (child processes, Ray
    actors and TRL's process inherit them). `native` leaves the environment as it is."""
    if setting not in CPU_KERNELS:
        raise ConfigError(f"cpu_kernels {setting!r}: one of {', '.join(CPU_KERNELS)}")
    if setting == "avx2":
        os.environ.update(AVX2)


def in_use() -> str:
    """The instruction set of PyTorch's own CPU kernels in this process (AVX2, AVX512, ...)."""
    import torch

    return torch.backends.cpu.get_cpu_capability()


def check(setting: str) -> str:
    """A line naming the kernels in use; an error when `avx2` was asked for and PyTorch runs
    wider ones (the variables came after its first kernel), a warning on a CPU without AVX2."""
    import sys

    used = in_use()
    if setting == "avx2" and used != "AVX2":
        if used.startswith("AVX512"):
            raise ConfigError(f"cpu_kernels avx2: PyTorch already runs {used} kernels in this "
                              "process (set ATEN_CPU_CAPABILITY=avx2 before torch starts)")
        print(f"warning: cpu_kernels avx2: this CPU runs {used} kernels, not AVX2; its numbers "
              "will differ from an AVX2 machine's", file=sys.stderr)
    return f"cpu kernels: {used} (cpu_kernels: {setting})"


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo (the platform's processor string elsewhere)."""
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8", errors="replace"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"
