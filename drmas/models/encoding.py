"""How chat messages become prompt token ids for a worker group: the model's chat template,
then a cap cut on one side as verl does. A config value (`PromptEncoding`, planned per group by
`drmas/config/groups.py`) and the functions that apply it, shared by the warm start, the
workers and the benchmarks."""

from __future__ import annotations

from dataclasses import dataclass, field

from drmas.errors import ConfigError

TRUNCATION = ("left", "middle", "right")


@dataclass(frozen=True)
class PromptEncoding:
    """How a worker group turns chat messages into prompt ids.

    `chat_template_kwargs` go to the model's chat template (per model; the paper renders
    Qwen3 prompts with `enable_thinking=False`). `max_tokens` caps the prompt (None: no cap),
    cutting it on the `truncation` side as verl does: `left` keeps the end (the paper's
    search runs, whose history grows), `middle` keeps both ends (its math runs), `right`
    keeps the start. A cap bounds the cost of a step whatever the data holds.
    """

    chat_template_kwargs: dict = field(default_factory=dict)
    max_tokens: int | None = None
    truncation: str = "left"

    def __post_init__(self):
        if self.truncation not in TRUNCATION:
            raise ConfigError(f"prompt truncation must be one of {', '.join(TRUNCATION)}, "
                              f"got {self.truncation!r}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ConfigError(f"max prompt tokens must be >= 1, got {self.max_tokens}")


def truncate_ids(ids: list[int], max_tokens: int | None, side: str = "left") -> list[int]:
    """`ids` cut to `max_tokens` on `side` (see PromptEncoding); unchanged when short enough."""
    if max_tokens is None or len(ids) <= max_tokens:
        return ids
    if side == "left":
        return ids[len(ids) - max_tokens:]
    if side == "right":
        return ids[:max_tokens]
    head = max_tokens // 2
    return ids[:head] + ids[len(ids) - (max_tokens - head):]


def encode_prompt(tokenizer, messages: list[dict], encoding: PromptEncoding | None = None) -> list[int]:
    """Token ids of a chat prompt, ending with the assistant header (then capped)."""
    encoding = encoding or PromptEncoding()
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False,
                                         **encoding.chat_template_kwargs)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return truncate_ids(ids, encoding.max_tokens, encoding.truncation)


def encode_prompts(tokenizer, prompts: list[list[dict]],
                   encoding: PromptEncoding | None = None) -> list[list[int]]:
    """`encode_prompt` of each prompt, a run of equal consecutive prompts encoded once: the n
    samples of a GRPO group or an avg@16 evaluation share their messages, and the chat
    template is a large part of a small model's rollout (20 of 160 ms for 64 rows)."""
    out: list[list[int]] = []
    for i, messages in enumerate(prompts):
        same = i > 0 and messages == prompts[i - 1]
        out.append(list(out[-1]) if same else encode_prompt(tokenizer, messages, encoding))
    return out


def encode_response(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
