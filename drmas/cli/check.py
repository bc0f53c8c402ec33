"""`drmas check gpu`: the end-to-end check of the single-device path (GPU by default, or the
same code path on the CPU); `drmas check numerics`: a fingerprint of this machine's float32
arithmetic, to compare machines."""

from __future__ import annotations

from drmas.cli.arguments import add_command, positive
from drmas.models.kernels import CPU_KERNELS


def cmd_check(args) -> None:
    if args.what == "numerics":
        from drmas.bench.numerics import check_numerics
        from drmas.models.kernels import pin

        setting = args.cpu_kernels or "avx2"
        pin(setting)                    # nothing has run a torch kernel in this process yet
        check_numerics(setting, threads=args.threads)
        return
    from drmas.bench.gpu_check import check_gpu

    check_gpu(device=args.device, size=args.size, work=args.work)


def add_commands(sub) -> None:
    """check."""
    sp = add_command(sub, "check", cmd_check, "gpu: end-to-end check of the single-device path "
                     "(GPU by default): 2 RL steps per method, checkpoint + resume, sleep/wake, "
                     "64-episode evaluation; numerics: a fingerprint of this machine's float32 "
                     "training arithmetic, to compare machines", suite=None)
    sp.add_argument("what", choices=["gpu", "numerics"],
                    help="what to check (gpu: the single-device path; numerics: the fingerprint)")
    sp.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="cuda (default) or cpu: the same code path on the CPU")
    sp.add_argument("--size", choices=["0.5b", "tiny"], default="0.5b",
                    help="model shape: Qwen2.5-0.5B (random weights) or the tiny profile's")
    sp.add_argument("--work", default=None, help="scratch folder (default: a new temp folder)")
    sp.add_argument("--cpu-kernels", choices=CPU_KERNELS, default=None,
                    help="numerics: the CPU kernels (default: avx2, as the default profile)")
    sp.add_argument("--threads", type=positive, default=1,
                    help="numerics: torch threads (default: 1, as the default profile's jobs)")
