"""PPO-clip loss, token-mean aggregation, entropy and the grad-norm helper."""

import math

import pytest
import torch

from drmas.algos.loss import grad_norm_and_clip, policy_loss, token_mean


def slow_loss(lp, old, adv, mask, low=0.2, high=0.2, dual=3.0):
    """Per-token reference in plain Python floats (verl's formula, written out)."""
    total, count = 0.0, 0
    for b in range(lp.shape[0]):
        for t in range(lp.shape[1]):
            if not mask[b][t]:
                continue
            a = float(adv[b])
            ratio = math.exp(float(lp[b][t]) - float(old[b][t]))
            loss = max(-a * ratio, -a * min(max(ratio, 1 - low), 1 + high))
            if a < 0:
                loss = min(loss, -a * dual)
            total += loss
            count += 1
    return total / count


def random_batch(seed, b=4, t=7):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(b, t, generator=g) * 3
    lp = old + torch.randn(b, t, generator=g) * 0.6  # plenty of ratios beyond the clip range
    adv = torch.randn(b, generator=g) * 2
    mask = torch.rand(b, t, generator=g) > 0.3
    mask[:, 0] = True
    return lp, old, adv, mask


@pytest.mark.parametrize("seed", range(10))
def test_matches_slow_reference(seed):
    lp, old, adv, mask = random_batch(seed)
    loss, metrics = policy_loss(lp, old, adv, mask, clip_low=0.2, clip_high=0.28)
    assert loss.item() == pytest.approx(slow_loss(lp, old, adv, mask, high=0.28), rel=1e-5, abs=1e-6)
    assert metrics["n_tokens"] == int(mask.sum())
    assert metrics["approx_kl"] == pytest.approx(float((old - lp)[mask].mean()), abs=1e-6)
    d = (lp - old)[mask]
    assert metrics["kl_k3"] == pytest.approx(float((d.exp() - 1 - d).mean()), rel=1e-5)


def test_per_row_and_per_token_advantages_agree_and_mask_hides_garbage():
    lp, old, adv, mask = random_batch(1)
    loss_row, _ = policy_loss(lp, old, adv, mask)
    loss_tok, _ = policy_loss(lp, old, adv[:, None].expand_as(lp).clone(), mask)
    assert loss_row.item() == pytest.approx(loss_tok.item())
    noisy = lp.clone()
    noisy[~mask] = 1e4  # masked positions may hold anything, even absurd ratios
    assert policy_loss(noisy, old, adv, mask)[0].item() == pytest.approx(loss_row.item())


def test_clip_fractions_on_constructed_tokens():
    # ratios per token: 1.5 (above 1.2), 0.5 (below 0.8), 1.0, 5.0 (above the dual cap 3)
    old = torch.zeros(2, 4)
    lp = torch.log(torch.tensor([[1.5, 0.5, 1.0, 5.0]] * 2))
    mask = torch.ones(2, 4, dtype=torch.bool)
    # A > 0: clipped where ratio > 1.2 (tokens 0 and 3); A < 0: clipped where ratio < 0.8
    # (token 1); dual cap active where -A * ratio > -A * 3, i.e. ratio > 3 (token 3)
    adv = torch.tensor([1.0, -1.0])
    loss, m = policy_loss(lp, old, adv, mask)
    assert m["clip_frac"] == pytest.approx(3 / 8)
    assert m["dual_clip_frac"] == pytest.approx(1 / 8)
    # losses: row A=+1: -1.2, -0.5, -1.0, -1.2; row A=-1: 1.5, 0.8, 1.0, min(5, 3) = 3
    assert loss.item() == pytest.approx((-1.2 - 0.5 - 1.0 - 1.2 + 1.5 + 0.8 + 1.0 + 3.0) / 8)


def test_dual_clip_caps_loss_and_stops_gradient():
    lp = torch.log(torch.tensor([[10.0]])).requires_grad_()
    loss, m = policy_loss(lp, torch.zeros(1, 1), torch.tensor([-2.0]), torch.ones(1, 1))
    assert loss.item() == pytest.approx(2.0 * 3.0) and m["dual_clip_frac"] == 1.0
    loss.backward()
    assert lp.grad.abs().max().item() == 0.0


def test_micro_batches_with_global_denom_sum_to_full_batch():
    lp, old, adv, mask = random_batch(3, b=6, t=5)
    lp = lp.clone().requires_grad_()
    full, _ = policy_loss(lp, old, adv, mask)
    (g_full,) = torch.autograd.grad(full, lp)
    denom = mask.sum()
    parts = [policy_loss(lp[i : i + 2], old[i : i + 2], adv[i : i + 2], mask[i : i + 2], denom=denom)[0]
             for i in range(0, 6, 2)]
    total = sum(parts)
    assert total.item() == pytest.approx(full.item(), rel=1e-6)
    (g_parts,) = torch.autograd.grad(total, lp)
    torch.testing.assert_close(g_parts, g_full)
    # without the global count each micro-batch averages on its own: generally different
    local = sum(policy_loss(lp[i : i + 2], old[i : i + 2], adv[i : i + 2], mask[i : i + 2])[0]
                for i in range(0, 6, 2)) / 3
    assert local.item() != pytest.approx(full.item(), rel=1e-6)


def test_token_mean_empty_mask_and_entropy_metric():
    x = torch.ones(2, 3)
    assert token_mean(x, torch.zeros(2, 3)).item() == 0.0
    logits = torch.randn(2, 3, 11)
    ent = torch.distributions.Categorical(logits=logits).entropy()
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    _, m = policy_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.ones(2), mask, entropy=ent)
    assert m["entropy"] == pytest.approx(float(ent[mask.bool()].mean()), rel=1e-6)


def _model_with_grads(values):
    params = [torch.nn.Parameter(torch.zeros(len(v))) for v in values]
    for p, v in zip(params, values):
        p.grad = torch.tensor(v)
    return params


def test_grad_norm_before_clipping_and_clips():
    params = _model_with_grads([[3.0, 0.0], [4.0]])
    norm, finite = grad_norm_and_clip(params, max_norm=1.0)
    assert finite and norm == pytest.approx(5.0)
    clipped = math.sqrt(sum(float((p.grad**2).sum()) for p in params))
    assert clipped == pytest.approx(1.0, rel=1e-4)
    small = _model_with_grads([[0.3, 0.4]])
    assert grad_norm_and_clip(small, 1.0) == (pytest.approx(0.5), True)
    assert small[0].grad.tolist() == pytest.approx([0.3, 0.4])  # below max_norm: untouched


@pytest.mark.parametrize("bad", [float("inf"), float("nan")])
def test_grad_norm_flags_non_finite_and_leaves_grads(bad):
    params = _model_with_grads([[1.0, bad], [2.0]])
    norm, finite = grad_norm_and_clip(params, max_norm=1.0)
    assert not finite and not math.isfinite(norm)
    assert params[1].grad.tolist() == [2.0]


def test_grad_norm_without_grads():
    assert grad_norm_and_clip([torch.nn.Parameter(torch.ones(2))], 1.0) == (0.0, True)


def test_entropy_bonus_by_hand():
    # ratio 1 everywhere: per-token loss = -A; rows A = +1 (2 tokens), A = -2 (1 token)
    lp = torch.zeros(2, 2)
    mask = torch.tensor([[1, 1], [1, 0]])
    ent = torch.tensor([[0.5, 1.5], [2.0, 9.0]], requires_grad=True)
    adv = torch.tensor([1.0, -2.0])
    plain, _ = policy_loss(lp, lp, adv, mask, entropy=ent)
    assert plain.item() == pytest.approx((-1 - 1 + 2) / 3)            # the bonus is off by default
    loss, m = policy_loss(lp, lp, adv, mask, entropy=ent, entropy_coeff=0.01)
    assert loss.item() == pytest.approx(0.0 - 0.01 * (0.5 + 1.5 + 2.0) / 3)
    loss.backward()
    torch.testing.assert_close(ent.grad, torch.tensor([[-0.01 / 3, -0.01 / 3], [-0.01 / 3, 0.0]]))
    assert m["entropy"] == pytest.approx(4 / 3)
    with pytest.raises(ValueError, match="entropy"):
        policy_loss(lp, lp, adv, mask, entropy_coeff=0.01)


def test_log_ratio_clamp_is_an_option():
    # one token, A = +1, log-ratio -25: below the clip range, so the loss is -ratio
    lp, old, adv, mask = torch.tensor([[-25.0]]), torch.zeros(1, 1), torch.ones(1), torch.ones(1, 1)
    clamped, m1 = policy_loss(lp, old, adv, mask)
    free, m2 = policy_loss(lp, old, adv, mask, log_ratio_clamp=None)
    assert clamped.item() == pytest.approx(-math.exp(-20)) and m1["approx_kl"] == pytest.approx(20)
    assert free.item() == pytest.approx(-math.exp(-25)) and m2["approx_kl"] == pytest.approx(25)
    # unclamped, masked positions may still hold anything
    noisy = torch.tensor([[-1.0, 1e4]])
    loss, _ = policy_loss(noisy, torch.zeros(1, 2), adv, torch.tensor([[1, 0]]), log_ratio_clamp=None)
    assert loss.item() == pytest.approx(-math.exp(-1))


def test_verl_averaging_on_two_micro_batches_by_hand():
    from drmas.algos.loss import LossOptions

    # ratio 1: per-token loss -A. Micro-batch 1: one row, A = +1, 2 tokens -> losses -1, -1;
    # micro-batch 2: one row, A = -1, 3 tokens -> losses 1, 1, 1.
    micro = [(torch.zeros(1, 3), torch.tensor([1.0]), torch.tensor([[1, 1, 0]])),
             (torch.zeros(1, 3), torch.tensor([-1.0]), torch.tensor([[1, 1, 1]]))]

    def total(options):
        scale = options.scale(minibatch_tokens=5.0, n_micro=2)
        return sum(policy_loss(lp, lp, a, m, denom=scale(float(m.sum())))[0].item() for lp, a, m in micro)

    # verl: mean(-1, -1) and mean(1, 1, 1), then their mean: (-1 + 1) / 2 = 0
    assert total(LossOptions(loss_aggregation="verl")) == pytest.approx(0.0)
    # one token mean over the mini-batch: (-2 + 3) / 5 = 0.2
    assert total(LossOptions()) == pytest.approx(0.2)
