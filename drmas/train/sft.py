"""Supervised warm start: next-token loss on the response tokens of agent demonstrations.

RL from a random tiny model would never see a reward; a short SFT on noisy traces gives a
policy that is right often enough for group-relative advantages to carry signal.
"""

from __future__ import annotations

import random

import torch

from drmas.models.encoding import encode_prompt, encode_response
from drmas.models.precision import autocast, float32_output_layer, resolve_dtype
from drmas.status.progress import bar as progress_bar
from drmas.train import scored
from drmas.train.logprobs import length_chunks, pack, response_logprobs
from drmas.train.optimizer import adamw, warmup_cosine


def sft(model, tokenizer, traces, *, steps: int, batch_size: int, lr: float, seed: int,
        desc: str = "warmstart", dtype: str = "auto", micro_batch_tokens: int = 1024,
        last_layer: str = "scored") -> list[float]:
    """Train `model` in place on (agent, messages, response) traces; return per-step losses.

    AdamW with linear warm-up (5%) and cosine decay, gradient clipping at 1.0. Float32 master
    weights; with `dtype` bfloat16 (or auto on hardware that runs bf16 fast: AMX, AVX-512-BF16,
    CUDA; drmas/models/precision.py) the forward/backward runs under bf16 autocast, the biggest
    speed lever there, and a several-fold slowdown elsewhere; the output layer stays in
    float32 under it (`float32_output_layer`: bf16 logits cost a search warm start 3.6 points
    of held-out accuracy). Each batch runs as
    micro-batches of rows of similar length (`length_chunks`, at most `micro_batch_tokens`
    padded tokens each); the loss is the mean over the whole batch's response tokens.
    With `last_layer` "scored" (and a model `scored.supported` takes) the last decoder layer
    runs at the response positions only (drmas/train/scored.py): a fifth less compute.
    """
    device = next(model.parameters()).device
    compute, _ = resolve_dtype(dtype, device)
    if last_layer == "scored" and scored.supported(model):
        def forward(ids, attn, resp):
            return scored.scored_logprobs(model, ids, attn, resp)
    else:
        def forward(ids, attn, resp):
            return response_logprobs(model, ids, attn, resp=resp)[0]
    rng = random.Random(seed)
    torch.manual_seed(seed)
    data = [(encode_prompt(tokenizer, m), encode_response(tokenizer, r)) for _, m, r in traces]
    opt = adamw(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.98))
    sched = warmup_cosine(opt, steps)
    model.train()
    losses: list[float] = []
    bar = progress_bar(range(steps), desc=desc, job=desc, mininterval=5, leave=False)
    with float32_output_layer(model, enabled=compute == torch.bfloat16):
        for _ in bar:
            batch = [data[rng.randrange(len(data))] for _ in range(batch_size)]
            n_tokens = sum(len(r) for _, r in batch)
            opt.zero_grad(set_to_none=True)
            loss = 0.0
            lengths = [len(p) + len(r) for p, r in batch]
            for chunk in length_chunks(lengths, batch_size, micro_batch_tokens):
                ids, attn, resp = (t.to(device) for t in pack(
                    [batch[i][0] for i in chunk], [batch[i][1] for i in chunk],
                    tokenizer.pad_token_id))
                with autocast(device, compute):
                    logprobs = forward(ids, attn, resp)
                part = -(logprobs * resp).sum() / n_tokens
                part.backward()
                loss += part.item()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            losses.append(loss)
            bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)
    model.eval()
    return losses
