"""Training-semantics options through a real worker group's update: its accumulated
gradient equals a plain loop that forms the loss as the option says (verl's per-micro-batch
token mean, averaged; the entropy bonus; no log-ratio clamp)."""



import pytest
import torch

from drmas.algos.loss import LossOptions, policy_loss
from drmas.config.profile import TrainConfig
from drmas.errors import ConfigError
from drmas.train.logprobs import pack
from drmas.train.workers import LocalGroup
from rows import captured_gradient, solver_rows


def test_options_from_settings():
    # the config's defaults are the paper's: verl's averaging, no clamp, no entropy bonus
    assert LossOptions.of(TrainConfig()) == LossOptions(0.0, "verl", None)
    tiny = TrainConfig(entropy_coeff=0.001, loss_aggregation="minibatch", log_ratio_clamp=20.0)
    assert LossOptions.of(tiny) == LossOptions(0.001, "minibatch", 20.0)
    with pytest.raises(ConfigError, match="loss_aggregation must be one of minibatch, verl"):
        LossOptions(loss_aggregation="seq-mean")


def reference_gradient(group, rows, chunks, coeff):
    """verl: each micro-batch's token-mean loss (entropy bonus included), then the mean."""
    group.model.zero_grad(set_to_none=True)
    group.model.train()
    for chunk in chunks:
        part = [rows[i] for i in chunk]
        ids, attn, resp = pack([r["prompt_ids"] for r in part], [r["response_ids"] for r in part],
                               group.tokenizer.pad_token_id)
        logp_all = torch.log_softmax(group.model(input_ids=ids, attention_mask=attn).logits[:, :-1]
                                     .float(), dim=-1)                  # every position, by hand
        lp = logp_all.gather(-1, ids[:, 1:, None]).squeeze(-1)
        ent = -(logp_all.exp() * logp_all).sum(-1)                      # differentiated
        old = torch.zeros_like(lp)
        for b, r in enumerate(part):
            old[b][resp[b] > 0] = torch.tensor(r["logprobs"])
        adv = torch.tensor([r["advantage"] for r in part])
        loss, _ = policy_loss(lp, old, adv, resp, entropy=ent, entropy_coeff=coeff,
                              log_ratio_clamp=None)
        (loss / len(chunks)).backward()
    grads = [p.grad.detach().clone() for p in group.params]
    group.model.zero_grad(set_to_none=True)
    return grads


def test_verl_aggregation_and_entropy_match_a_plain_loop(tiny_model_dir):
    torch.manual_seed(0)
    settings = TrainConfig(ppo_mini_batches=1, micro_batch_rows=2, micro_batch_tokens=1 << 20,
                             grad_clip=1e9, entropy_coeff=0.05, loss_aggregation="verl",
                             log_ratio_clamp=None)
    group = LocalGroup("g", tiny_model_dir, ["solver"], settings)
    rows = solver_rows(group)
    got = captured_gradient(group, rows)
    want = reference_gradient(group, rows, [[0, 1], [2, 3]], coeff=0.05)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-7)
    # the entropy bonus reaches the gradient: without it the gradient differs
    no_bonus = LocalGroup("g", tiny_model_dir, ["solver"], TrainConfig(
        ppo_mini_batches=1, micro_batch_rows=2, micro_batch_tokens=1 << 20, grad_clip=1e9,
        entropy_coeff=0.0, loss_aggregation="verl", log_ratio_clamp=None))
    assert max(float((a - b).abs().max()) for a, b in zip(captured_gradient(no_bonus, rows), got)) > 1e-5
    # the option matters: one token mean over the mini-batch gives another gradient
    minibatch = LocalGroup("g", tiny_model_dir, ["solver"], TrainConfig(
        ppo_mini_batches=1, micro_batch_rows=2, micro_batch_tokens=1 << 20, grad_clip=1e9,
        entropy_coeff=0.05, loss_aggregation="minibatch", log_ratio_clamp=None))
    other = captured_gradient(minibatch, rows)
    assert max(float((a - b).abs().max()) for a, b in zip(other, got)) > 1e-4
