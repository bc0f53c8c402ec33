"""Which floating-point type a model computes in: bfloat16 only where the hardware runs it fast.

bf16 halves memory and, on a CUDA GPU or a CPU with AMX / AVX-512-BF16, runs matmuls several
times faster than float32. On a CPU without them torch emulates bf16: a matmul runs ~70x
slower (0.8 against 56 GFLOP/s measured on an AVX2-only EPYC), so an unconditional bf16
would make a CPU run hours long. `dtype: auto` therefore asks the hardware:

- CUDA: bf16 when `torch.cuda.is_bf16_supported()`.
- CPU: bf16 when it reports AMX or AVX-512-BF16 (torch's own probes, then /proc/cpuinfo);
  otherwise a short matmul probe decides (bf16 only if measurably faster than float32).

Rollout engines hold bf16 weights; training keeps float32 master weights and runs its
forward/backward under bf16 autocast (`autocast`).
"""

from __future__ import annotations

import contextlib
import functools
import time
import types
from pathlib import Path

import torch

from drmas.errors import ConfigError

DTYPES = ("auto", "float32", "bfloat16")
CPU_BF16_FLAGS = ("amx_bf16", "avx512_bf16")


def cpu_bf16_features() -> set[str]:
    """The bf16 matmul features this CPU reports (a subset of `CPU_BF16_FLAGS`)."""
    found = set()
    probes = {"amx_bf16": "_is_amx_tile_supported", "avx512_bf16": "_is_avx512_bf16_supported"}
    for flag, probe in probes.items():
        fn = getattr(torch.cpu, probe, None)
        with contextlib.suppress(Exception):
            if fn is not None and fn():
                found.add(flag)
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        words = set(cpuinfo.read_text(errors="replace").split())
        found |= {f for f in CPU_BF16_FLAGS if f in words}
    return found


def bf16_matmul_speedup(size: int = 256, repeats: int = 3) -> float:
    """float32 time / bfloat16 time of a `size`² CPU matmul (best of `repeats`): > 1 when
    bf16 is faster. About 0.1 s on a CPU that emulates bf16."""
    def best(dtype):
        a = torch.ones(size, size, dtype=dtype)
        a @ a                                   # warm-up (kernel selection, allocation)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            a @ a
            times.append(time.perf_counter() - t0)
        return min(times)

    return best(torch.float32) / max(best(torch.bfloat16), 1e-9)


@functools.lru_cache(maxsize=None)
def cpu_bf16_fast() -> tuple[bool, str]:
    """(does this CPU run bf16 fast?, why): the features first, the probe otherwise."""
    features = cpu_bf16_features()
    if features:
        return True, "cpu reports " + ", ".join(sorted(features))
    speedup = bf16_matmul_speedup()
    return speedup > 1.0, f"no AMX/AVX-512-BF16; bf16 matmul probe {speedup:.2f}x float32"


def cuda_bf16_fast() -> tuple[bool, str]:
    ok = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return ok, "cuda bf16 supported" if ok else "cuda without bf16"


def resolve_dtype(setting: str, device: str | torch.device = "cpu") -> tuple[torch.dtype, str]:
    """The dtype for `setting` (auto|float32|bfloat16) on `device`, and the reason."""
    if setting not in DTYPES:
        raise ConfigError(f"dtype {setting!r} is not one of {', '.join(DTYPES)}")
    if setting != "auto":
        return getattr(torch, setting), "set explicitly"
    fast, why = cuda_bf16_fast() if torch.device(device).type == "cuda" else cpu_bf16_fast()
    return (torch.bfloat16 if fast else torch.float32), f"auto: {why}"


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def autocast(device: torch.device, dtype: torch.dtype):
    """bf16 autocast for training with float32 master weights; a no-op for float32."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=dtype == torch.bfloat16)


def _float32_linear(self, x: torch.Tensor) -> torch.Tensor:
    with torch.autocast(x.device.type, enabled=False):
        bias = None if self.bias is None else self.bias.float()
        return torch.nn.functional.linear(x.float(), self.weight.float(), bias)


@contextlib.contextmanager
def float32_output_layer(model, enabled: bool = True):
    """Within the block, `model.lm_head` computes in float32 even under bf16 autocast.

    Why: the output layer turns hidden states into logits whose log-softmax is the loss; under
    autocast its matmul rounds each logit to bf16 (8 bits of mantissa: about 0.06 on a logit
    of 10), noise on every token's log-probability and on the gradient of every weight. The
    search warm start of the `default` entry (1080 steps) trained under bf16 autocast scored 3.6
    and 2.1 points below its float32 twin (warm-start seeds 0 and 1) on 625 held-out
    questions; with this layer in float32, 0.4 and 0.6 above (docs/history.md,
    2026-12-05). For the tiny models the layer is a few percent of the compute. The RL update
    does not use it: there the paper's code computes bf16 logits, and for a 3B model's
    152k-token layer float32 would cost a large share of a GPU step. The instance's `forward`
    is replaced and restored; weights, state-dict keys and saved checkpoints are untouched.
    """
    head = getattr(model, "lm_head", None)
    if not enabled or not isinstance(head, torch.nn.Linear):
        yield model
        return
    head.forward = types.MethodType(_float32_linear, head)
    try:
        yield model
    finally:
        del head.forward
