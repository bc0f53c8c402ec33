"""Tokenizer and tiny models: round trips through save_pretrained keep ids and weights."""

import torch

from conftest import SMALL
from drmas.models.tiny import load_model, load_tokenizer, tiny_model, train_tokenizer

TEXTS = ["Ann has 12 pens. Ann gets 3. 12 + 3 = 15. \\boxed{15} <verify>approve</verify>"] * 20


def test_tokenizer_ids_survive_a_model_folder(tmp_path):
    tok = train_tokenizer(TEXTS, 300)
    model = tiny_model(SMALL, len(tok), seed=0)
    model.save_pretrained(tmp_path)          # config.json says qwen2 ...
    tok.save_pretrained(tmp_path)
    loaded = load_tokenizer(tmp_path)        # ... but the BPE must stay ours, ids unchanged
    text = "Ann has 12 pens. 12 + 3 = 15."
    assert loaded(text)["input_ids"] == tok(text)["input_ids"]
    assert loaded.decode(loaded(text)["input_ids"]) == text
    assert loaded.eos_token == "<|im_end|>" and loaded.padding_side == "left"
    prompt = loaded.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True,
                                        tokenize=False)
    assert prompt == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_tiny_model_shapes_and_reload(tmp_path):
    tok = train_tokenizer(TEXTS, 300)
    model = tiny_model({"hidden_size": 128, "heads": 2, "layers": 2, "intermediate_size": 256}, len(tok), 0)
    assert model.config.hidden_size // model.config.num_attention_heads == 64   # vLLM needs >= 32
    model.save_pretrained(tmp_path)
    again = load_model(tmp_path)
    ids = torch.tensor([[1, 5, 9, 20]])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, again(ids).logits)
    assert torch.equal(tiny_model(SMALL, len(tok), 3).model.embed_tokens.weight,
                       tiny_model(SMALL, len(tok), 3).model.embed_tokens.weight)     # seeded


def test_whole_numbers_are_one_token_each_and_survive_a_model_folder(tmp_path):
    texts = ["The founding year of Bevi Society is 1862. <answer> 1862 </answer>",
             "The birth year of Varo Telmin is 1795, of Lezo Ludi 1841."] * 10
    plain = train_tokenizer(texts, 300)
    tok = train_tokenizer(texts, 300, whole_numbers=True)
    assert len(tok) == len(plain) + 3                         # 1795, 1841, 1862
    tok.save_pretrained(tmp_path)
    loaded = load_tokenizer(tmp_path)
    text = "Lezo Ludi is 1841. <answer> 1841 </answer>"
    ids = loaded(text)["input_ids"]
    assert ids == tok(text)["input_ids"]
    pieces = [loaded.decode([i]) for i in ids]
    assert pieces.count("1841") == 2 and not any(p.strip() in ("18", "41") for p in pieces)
    assert loaded.decode(ids) == text
