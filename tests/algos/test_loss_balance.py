"""Loss balancing by agent frequency: the weights on a hand-worked batch, the weighted loss and
gradient against plain loops, and all four cells of estimator x balance in the trainer."""

import numpy as np
import pytest
import torch

from conftest import make_config
from drmas.algos.balance import loss_balance_weights
from drmas.algos.loss import policy_loss
from drmas.config.profile import TrainConfig
from drmas.train.logprobs import pack, response_logprobs
from drmas.train.workers import LocalGroup
from rows import captured_gradient, solver_rows
from training import make_trainer


def test_weights_on_a_hand_worked_batch():
    # uid "a": solver x2, verifier x1; uid "b": solver x1, verifier x3 (a looping verifier)
    uid = ["a", "a", "a", "b", "b", "b", "b"]
    agent = ["solver", "solver", "verifier", "solver", "verifier", "verifier", "verifier"]
    # 1/n = 1/2, 1/2, 1, 1, 1/3, 1/3, 1/3; their mean is 4/7, so w = (1/n) * 7/4
    want = [7 / 8, 7 / 8, 7 / 4, 7 / 4, 7 / 12, 7 / 12, 7 / 12]
    got = loss_balance_weights(uid, agent)
    np.testing.assert_allclose(got, want, rtol=1e-15)
    assert got.mean() == pytest.approx(1.0)
    # every (uid, agent) pool carries the same total weight
    totals = {}
    for u, a, w in zip(uid, agent, got):
        totals[u, a] = totals.get((u, a), 0.0) + w
    assert all(t == pytest.approx(7 / 4) for t in totals.values())


def test_weights_pool_by_pair_and_accept_any_ids():
    # the same agent name under two uids is two pools; integer uids work as strings do
    # 1/n = 1, 1/2, 1/2 with mean 2/3
    assert loss_balance_weights([0, 1, 1], ["x", "x", "x"]).tolist() == pytest.approx([3 / 2, 3 / 4, 3 / 4])
    assert loss_balance_weights([7, 7], ["x", "y"]).tolist() == [1.0, 1.0]
    assert loss_balance_weights(["u"] * 4, ["x"] * 4).tolist() == [1.0] * 4     # one pool: no-op
    assert loss_balance_weights([], []).shape == (0,)
    with pytest.raises(ValueError, match="differ in length"):
        loss_balance_weights([1, 2], ["x"])


def plain_ppo_token_loss(lp, old, adv, low=0.2, high=0.2, dual=3.0):
    """One token's PPO-clip loss with dual clip, written out."""
    ratio = torch.exp(lp - old)
    loss = torch.maximum(-adv * ratio, -adv * torch.clamp(ratio, 1 - low, 1 + high))
    return torch.minimum(loss, torch.tensor(-adv * dual)) if adv < 0 else loss


def test_policy_loss_with_row_weights_matches_a_plain_loop():
    g = torch.Generator().manual_seed(0)
    lp, old = torch.randn(3, 5, generator=g) * 0.3, torch.randn(3, 5, generator=g) * 0.3
    lp.requires_grad_(True)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]], dtype=torch.float32)
    adv, w = torch.tensor([1.5, -0.7, -2.0]), torch.tensor([0.5, 2.0, 1.25])
    loss, m = policy_loss(lp, old, adv, mask, row_weights=w, log_ratio_clamp=None)
    want = sum(w[b] * plain_ppo_token_loss(lp[b, t], old[b, t], float(adv[b]))
               for b in range(3) for t in range(5) if mask[b, t]) / mask.sum()
    torch.testing.assert_close(loss, want)
    grad, = torch.autograd.grad(loss, lp)
    want_grad, = torch.autograd.grad(want, lp)
    torch.testing.assert_close(grad, want_grad)
    # the metrics do not depend on the weights; weights of 1 are no weights
    _, plain = policy_loss(lp, old, adv, mask, log_ratio_clamp=None)
    assert m == plain
    torch.testing.assert_close(policy_loss(lp, old, adv, mask, row_weights=torch.ones(3),
                                           log_ratio_clamp=None)[0],
                               policy_loss(lp, old, adv, mask, log_ratio_clamp=None)[0])


def test_group_update_gradient_with_weights_matches_a_plain_loop(tiny_model_dir):
    """A real worker group's accumulated gradient (verl aggregation: micro-batch token means,
    then their mean) with `loss_weight` rows equals a row-by-row, token-by-token loop."""
    torch.manual_seed(0)
    settings = TrainConfig(ppo_mini_batches=1, micro_batch_rows=2, micro_batch_tokens=1 << 20,
                           grad_clip=1e9, loss_aggregation="verl", log_ratio_clamp=None)
    group = LocalGroup("g", tiny_model_dir, ["solver"], settings)
    rows = solver_rows(group)
    for r, w in zip(rows, [0.5, 1.5, 2.0, 0.25]):
        r["loss_weight"] = w
    got = captured_gradient(group, rows)

    group.model.zero_grad(set_to_none=True)
    group.model.train()
    chunks = [[0, 1], [2, 3]]                # length-sorted micro-batches of 2 rows
    total = 0.0
    for chunk in chunks:
        chunk_loss, chunk_tokens = 0.0, 0
        for i in chunk:
            r = rows[i]
            ids, attn, resp = pack([r["prompt_ids"]], [r["response_ids"]], group.tokenizer.pad_token_id)
            lp = response_logprobs(group.model, ids, attn)[0][0][resp[0] > 0]
            for t in range(len(r["response_ids"])):
                chunk_loss = chunk_loss + r["loss_weight"] * plain_ppo_token_loss(
                    lp[t], torch.tensor(r["logprobs"][t]), r["advantage"])
            chunk_tokens += len(r["response_ids"])
        total = total + chunk_loss / chunk_tokens / len(chunks)
    total.backward()
    want = [p.grad.detach().clone() for p in group.params]
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-7)
    # and the weights matter
    for r in rows:
        del r["loss_weight"]
    unweighted = captured_gradient(LocalGroup("g", tiny_model_dir, ["solver"], settings), rows)
    assert max(float((a - b).abs().max()) for a, b in zip(unweighted, got)) > 1e-4


def rejecting_verifier(orchestra):
    """A random tiny model never writes a verdict tag (missing = approve), so every episode
    would call each agent once and balancing would be a no-op: reject by output length."""
    parse = orchestra.verifier.parse
    orchestra.verifier.parse = lambda text: (
        type(parse(text))("reject", True) if len(text) % 2 else parse(text))


def recording_update(name, update, sent):
    def record(rows, seed):
        sent[name] = rows
        return update(rows, seed)
    return record


@pytest.mark.parametrize("method", ["grpo", "drmas"])
def test_four_cells_of_estimator_and_balance(tiny_model_dir, math_rows, tmp_path, method):
    """Balance on or off under either estimator: the same rollouts and advantages (the
    estimator's alone); on, every row each group trains on carries its balance weight over
    the whole batch, and the update changes; off, rows carry none."""
    train = [r for r in math_rows if r["split"] == "train"]
    seen = {}
    for balance in (False, True):
        cfg = make_config(tiny_model_dir, loss_balance=balance)
        trainer = make_trainer(cfg, train, tmp_path / str(balance), "nonshared", method)
        rejecting_verifier(trainer.orchestra)
        batch, sent = [], {}
        add = trainer.shaping.add_loss_weights
        trainer.shaping.add_loss_weights = lambda rows: batch.extend(rows) or add(rows)
        for g, grp in trainer.groups.items():
            grp.update = recording_update(g, grp.update, sent)
        seen[balance] = (trainer.train_step(), batch, sent)
    (m_off, rows_off, sent_off), (m_on, rows_on, sent_on) = seen[False], seen[True]
    assert "loss_balance" not in m_off
    assert all("loss_weight" not in r for part in sent_off.values() for r in part)
    assert [r["advantage"] for r in rows_on] == [r["advantage"] for r in rows_off]
    assert [r["response_ids"] for r in rows_on] == [r["response_ids"] for r in rows_off]
    want = loss_balance_weights([r["uid"] for r in rows_on], [r["agent"] for r in rows_on])
    assert len(set(want.round(12))) > 1                 # unequal call counts: real reweighting
    for g, part in sent_on.items():
        mine = [w for r, w in zip(rows_on, want) if r["group"] == g]
        assert [r["loss_weight"] for r in part] == pytest.approx(mine, rel=1e-12)
    assert m_on["loss_balance"] == {a: pytest.approx(np.mean([w for r, w in zip(rows_on, want)
                                                              if r["agent"] == a]))
                                    for a in ("solver", "verifier")}
    assert m_on["groups"]["solver"]["grad_norm"] != m_off["groups"]["solver"]["grad_norm"]
