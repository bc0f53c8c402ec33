"""Tokenizers and models: the tiny profile's own BPE tokenizer and Qwen2-architecture models,
and loading of any saved or hub model.

Tiny models are real `transformers` Qwen2 causal LMs, only small; they are saved with
`save_pretrained` so every later stage (and vLLM) loads them like any other checkpoint.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from drmas.errors import ConfigError

if TYPE_CHECKING:       # torch is imported where a model is built: the tokenizer job needs none
    import torch

NUMBER = re.compile(r"\d+")
PAD, EOS, IM_START = "<|endoftext|>", "<|im_end|>", "<|im_start|>"

# Qwen-style chat template: the response of an assistant turn ends with <|im_end|> (EOS).
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def train_tokenizer(texts: Iterable[str], vocab_size: int, whole_numbers: bool = False):
    """Byte-level BPE trained on the task text. Numbers are not split into digits: frequent
    small numbers become single tokens, which turns tiny-model arithmetic into a lookup table
    it can learn in a short warm start.

    `whole_numbers` adds every number of the text as a token of its own (beyond `vocab_size`).
    BPE leaves rare numbers in pieces, and a piece such as " 18" starts every 19th-century
    year: a tiny model that reads three passages with a year each then copies the right
    first piece and a wrong rest ("1841" -> "1811"). One token per number makes a year as
    easy to copy as a name.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[PAD, IM_START, EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    texts = list(texts)
    tok.train_from_iterator(texts, trainer)
    if whole_numbers:
        tok.add_tokens(sorted({n for t in texts for n in NUMBER.findall(t)}, key=lambda n: (len(n), n)))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, pad_token=PAD,
                                   additional_special_tokens=[IM_START])
    fast.chat_template = CHAT_TEMPLATE
    fast.padding_side = "left"
    return fast


def tiny_model(spec, vocab_size: int, seed: int):
    """A freshly initialised Qwen2 causal LM of the size in `spec` (a `ModelSpec` of kind
    tiny, or a dict with the same keys)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    get = spec.get if isinstance(spec, dict) else lambda k, d=None: getattr(spec, k, d)
    hidden, heads = int(get("hidden_size")), int(get("heads"))
    if hidden % heads:
        raise ConfigError(f"hidden_size {hidden} is not a multiple of heads {heads}")
    config = Qwen2Config(
        vocab_size=vocab_size, hidden_size=hidden, intermediate_size=int(get("intermediate_size")),
        num_hidden_layers=int(get("layers")), num_attention_heads=heads,
        num_key_value_heads=heads, max_position_embeddings=int(get("max_positions", 512) or 512),
        tie_word_embeddings=True, rope_theta=10000.0, use_sliding_window=False,
    )
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(config)


def load_tokenizer(path: str | Path):
    """The tokenizer saved with a model. A plain `tokenizers` tokenizer (ours) is loaded as
    such: AutoTokenizer would pick the model type's class (Qwen2Tokenizer for our Qwen2
    models), which brings its own pre-tokenizer and silently changes the token ids."""
    import json

    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    config = Path(path) / "tokenizer_config.json"
    # a regular file of sane size only (a FIFO would block; the file is a few kB)
    readable = config.is_file() and config.stat().st_size <= 16 * 2**20
    plain = readable and json.loads(config.read_text()).get("tokenizer_class") in (
        "TokenizersBackend", "PreTrainedTokenizerFast")
    try:
        tok = (PreTrainedTokenizerFast if plain else AutoTokenizer).from_pretrained(str(path))
    except OSError as exc:
        raise ConfigError(f"cannot load tokenizer from {path}: {_reason(path, exc)}") from exc
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def load_model(path: str | Path, dtype: torch.dtype | None = None):
    """Load a causal LM saved with `save_pretrained` (a local folder or a hub id), in `dtype`
    (default: float32)."""
    import torch
    from transformers import AutoModelForCausalLM

    dtype = torch.float32 if dtype is None else dtype
    try:
        return AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype)
    except OSError as exc:
        raise ConfigError(f"cannot load model from {path}: {_reason(path, exc)}") from exc


def _reason(path: str | Path, exc: OSError) -> str:
    """The first line of a loading error; for a hub id (no such local folder), how to work
    without the hub: a local copy named by the model's `path:`."""
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if Path(path).exists():
        return first
    return ("no such local folder, and not loadable as a hub id (offline?): download it and "
            f"set the model's `path:` in the profile to that folder ({first})")
