"""Dense retrieval end to end: `drmas index --kind dense` with a tiny randomly initialised
BERT-style encoder saved locally, served by `drmas serve`, checked against numpy."""

import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import make_corpus

N_DOCS = 120


def save_tiny_encoder(path, texts):
    """A WordPiece tokenizer trained on `texts` and a random 2-layer BERT, saved to `path`."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(list(texts) + ["query: passage:"],
                            trainers.WordPieceTrainer(vocab_size=400, special_tokens=specials))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]",
                                   model_max_length=512)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(fast), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=512)
    BertModel(config).save_pretrained(path)
    fast.save_pretrained(path)


def reference_embeddings(encoder, texts, max_length=256):
    """e5 embeddings the plain way: one text at a time, mean over its tokens, unit length."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tok, model = AutoTokenizer.from_pretrained(encoder), AutoModel.from_pretrained(encoder).eval()
    rows = []
    for text in texts:
        inputs = tok(text, truncation=True, max_length=max_length, return_tensors="pt")
        with torch.no_grad():
            hidden = model(**inputs).last_hidden_state[0].numpy().astype(np.float64)
        vector = hidden.mean(axis=0)
        rows.append(vector / np.linalg.norm(vector))
    return np.array(rows)


@pytest.fixture(scope="module")
def dense_index(tmp_path_factory):
    pytest.importorskip("faiss", reason="dense retrieval needs faiss-cpu")
    root = tmp_path_factory.mktemp("dense")
    rows = make_corpus(N_DOCS, seed=1)
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    save_tiny_encoder(root / "encoder", [r["contents"] for r in rows])
    proc = subprocess.run([sys.executable, "-m", "drmas.cli", "index", "--kind", "dense",
                           "--corpus", str(corpus), "--out", str(root / "index"),
                           "--encoder", str(root / "encoder"), "--batch-size", "16"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return rows, root / "encoder", root / "index"


@pytest.mark.slow  # two child processes load torch, transformers and pyserini: ~30 s of CPU
def test_dense_index_served_matches_numpy(dense_index):
    from drmas.retrieval.local import LocalService

    rows, encoder, index_dir = dense_index
    assert sorted(p.name for p in index_dir.parent.iterdir()) == ["corpus.jsonl", "encoder", "index"]
    meta = json.loads((index_dir / "dense.json").read_text())
    assert (meta["num_docs"], meta["dimension"], meta["pooling"]) == (N_DOCS, 32, "mean")
    queries = [r["contents"] for r in rows] + ["guild lore", ""]
    with LocalService(index_dir) as service:     # `drmas serve`, kind read from the folder
        health = service.client.health()
        hits, errors = service.client.retrieve_checked(queries, topk=5)
    assert (health["kind"], health["num_docs"]) == ("dense", N_DOCS) and errors == {}

    docs = reference_embeddings(encoder, ["passage: " + r["contents"] for r in rows])
    wanted = reference_embeddings(encoder, ["query: " + q for q in queries])
    scores = wanted @ docs.T
    position = {r["id"]: i for i, r in enumerate(rows)}
    for q, got in enumerate(hits):
        assert len(got) == 5
        best = np.sort(scores[q])[::-1][:5]
        assert [h.score for h in got] == pytest.approx(best, abs=1e-4)      # the same top 5
        for h in got:                                                      # each at its own score
            assert h.score == pytest.approx(scores[q, position[h.docid]], abs=1e-4)
            assert h.contents == rows[position[h.docid]]["contents"]
    own_first = sum(got[0].docid == r["id"] for got, r in zip(hits, rows))
    assert own_first == sum(np.argmax(scores[i]) == i for i in range(N_DOCS))
    assert own_first >= 0.95 * N_DOCS          # a passage's own text finds it, random encoder or not


def test_dense_errors_are_one_line(tmp_path, capsys):
    """Each fails before pyserini or a JVM is loaded, so in-process `main` is safe here."""
    from drmas.cli.main import main

    index_dir = tmp_path / "index"     # what `drmas index --kind dense` leaves, as far as
    index_dir.mkdir()                  # these checks look: its dense.json
    (index_dir / "dense.json").write_text(json.dumps({"kind": "dense", "encoder": str(tmp_path / "gone")}))
    (index_dir / "docs.jsonl").write_text('{"id": "1", "contents": "T\\nx"}\n')
    cases = [
        (["index", "--kind", "dense", "--corpus", str(index_dir / "docs.jsonl"),
          "--out", str(tmp_path / "x"), "--encoder", str(tmp_path / "no_encoder")],
         "drmas index: error: cannot load encoder"),
        (["serve", "--index", str(index_dir), "--kind", "bm25", "--port", "0"],
         "drmas serve: error: " + f"{index_dir} holds a dense index, not a bm25 one"),
        (["serve", "--index", str(index_dir), "--port", "0"],
         "drmas serve: error: cannot load encoder"),
        (["serve", "--index", str(tmp_path / "x"), "--port", "0"],
         f"drmas serve: error: no retrieval index at {tmp_path / 'x'}"),
    ]
    for argv, message in cases:
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(message) and len(err.splitlines()) == 1, err
    assert not (tmp_path / "x").exists()
