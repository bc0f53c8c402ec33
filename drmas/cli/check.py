"""`drmas check gpu`: the end-to-end check of the single-device path (GPU by default, or the
same code path on the CPU)."""

from __future__ import annotations

from drmas.cli.arguments import add_command


def cmd_check(args) -> None:
    from drmas.bench.gpu_check import check_gpu

    check_gpu(device=args.device, size=args.size, work=args.work)


def add_commands(sub) -> None:
    """check."""
    sp = add_command(sub, "check", cmd_check, "end-to-end check of the single-device path (GPU "
                     "by default): 2 RL steps per method, checkpoint + resume, sleep/wake, "
                     "64-episode evaluation", suite=None)
    sp.add_argument("what", choices=["gpu"], help="what to check (gpu: the single-device path)")
    sp.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="cuda (default) or cpu: the same code path on the CPU")
    sp.add_argument("--size", choices=["0.5b", "tiny"], default="0.5b",
                    help="model shape: Qwen2.5-0.5B (random weights) or the tiny profile's")
    sp.add_argument("--work", default=None, help="scratch folder (default: a new temp folder)")
