"""Prompt encoding: chat-template keyword arguments per model (Qwen3's `enable_thinking`) and
the prompt cap with verl's truncation sides."""

import shutil

import pytest

from drmas.errors import ConfigError
from drmas.models.encoding import PromptEncoding, encode_prompt, encode_prompts, truncate_ids

# A Qwen3-style chat template (ChatML) with its thinking switch: with enable_thinking false the
# generation prompt carries an empty think block, so the model answers without reasoning.
QWEN3_STYLE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}"
    "{% endif %}")
MESSAGES = [{"role": "system", "content": "You are a helpful and harmless assistant."},
            {"role": "user", "content": "What is 1 + 1?"}]


@pytest.mark.parametrize("side,expected", [
    ("left", [5, 6, 7, 8, 9]),           # keeps the end (search: the newest history)
    ("right", [0, 1, 2, 3, 4]),
    ("middle", [0, 1, 7, 8, 9]),         # 5 // 2 = 2 from the start, 3 from the end
])
def test_truncate_ids_sides(side, expected):
    ids = list(range(10))
    assert truncate_ids(ids, 5, side) == expected
    assert truncate_ids(ids, 10, side) == ids and truncate_ids(ids, None, side) == ids
    assert len(truncate_ids(ids, 1, side)) == 1


def test_prompt_encoding_rejects_bad_settings():
    with pytest.raises(ConfigError, match="truncation must be one of left, middle, right, got 'top'"):
        PromptEncoding(truncation="top")
    with pytest.raises(ConfigError, match="max prompt tokens must be >= 1, got 0"):
        PromptEncoding(max_tokens=0)


@pytest.fixture(scope="module")
def qwen3_style_dir(tiny_model_dir, tmp_path_factory):
    """The tiny fixture model, its tokenizer carrying a Qwen3-style chat template."""
    from drmas.models.tiny import load_tokenizer

    path = tmp_path_factory.mktemp("qwen3_style")
    shutil.copytree(tiny_model_dir, path, dirs_exist_ok=True)
    tok = load_tokenizer(path)
    tok.chat_template = QWEN3_STYLE
    tok.save_pretrained(path)
    return path


def test_chat_template_receives_enable_thinking(qwen3_style_dir):
    from drmas.models.tiny import load_tokenizer

    tok = load_tokenizer(qwen3_style_dir)
    plain = tok.decode(encode_prompt(tok, MESSAGES))
    quiet = tok.decode(encode_prompt(tok, MESSAGES, PromptEncoding({"enable_thinking": False})))
    assert plain.endswith("<|im_start|>assistant\n")
    assert quiet == plain + "<think>\n\n</think>\n\n"


def test_long_prompts_are_capped_on_their_side(qwen3_style_dir):
    from drmas.models.tiny import load_tokenizer

    tok = load_tokenizer(qwen3_style_dir)
    long = [{"role": "user", "content": "What is 1 + 1? " * 2000}]     # ~30k characters
    full = encode_prompt(tok, long)
    left = encode_prompt(tok, long, PromptEncoding(max_tokens=64, truncation="left"))
    middle = encode_prompt(tok, long, PromptEncoding(max_tokens=64, truncation="middle"))
    assert len(full) > 1000 and len(left) == len(middle) == 64
    assert left == full[-64:] and middle == full[:32] + full[-32:]
    assert tok.decode(left).endswith("<|im_start|>assistant\n")       # still a generation prompt


def test_runs_of_equal_prompts_are_encoded_once(qwen3_style_dir, monkeypatch):
    """encode_prompts equals encode_prompt per prompt, calls the template once per run of
    equal consecutive prompts (a prompt seen again after another is encoded again), and hands
    out lists that do not alias one another."""
    from drmas.models import encoding as enc
    from drmas.models.tiny import load_tokenizer

    tok = load_tokenizer(qwen3_style_dir)
    other = [{"role": "user", "content": "What is 2 + 3?"}]
    prompts = [MESSAGES] * 3 + [other] * 2 + [MESSAGES]
    cap = PromptEncoding(max_tokens=12, truncation="middle")
    calls = []
    monkeypatch.setattr(enc, "encode_prompt",
                        lambda *a: calls.append(1) or encode_prompt(*a))
    ids = encode_prompts(tok, prompts, cap)
    assert ids == [encode_prompt(tok, p, cap) for p in prompts] and len(calls) == 3
    ids[0].append(-1)
    assert ids[1] == ids[2] == encode_prompt(tok, MESSAGES, cap)


def test_worker_generates_from_the_encoded_prompt(qwen3_style_dir):
    """The worker group encodes with its own chat-template kwargs and cap."""
    from drmas.config.profile import TrainConfig
    from drmas.models.tiny import load_tokenizer
    from drmas.rollout.base import Sampling
    from drmas.train.workers import LocalGroup

    encoding = PromptEncoding({"enable_thinking": False}, max_tokens=40, truncation="middle")
    group = LocalGroup("g", qwen3_style_dir, ["solver"], TrainConfig(), trainable=False,
                       encoding=encoding)
    prompts = [MESSAGES, [{"role": "user", "content": "Add. " * 200}]]
    gens = group.generate(prompts, Sampling(1.0, 1.0, 4), seed=0)
    tok = load_tokenizer(qwen3_style_dir)
    assert [g.prompt_ids for g in gens] == [encode_prompt(tok, p, encoding) for p in prompts]
    assert tok.decode(gens[0].prompt_ids).endswith("<think>\n\n</think>\n\n")
    assert len(gens[1].prompt_ids) == 40
