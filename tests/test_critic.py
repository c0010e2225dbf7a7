"""PPO's critic math against hand-computed values: GAE, per-token rewards, whitening, the clipped
value loss, explained variance, and per-token advantages in the policy loss."""

from __future__ import annotations

import math

import pytest
import torch

from ablate.factors.algorithms import Algorithm
from ablate.factors.critic import (
    explained_variance,
    gae,
    masked_whiten,
    num_params,
    token_rewards,
    value_loss,
)
from ablate.factors.estimators import value_head
from ablate.factors.objective import AGGREGATIONS, RATIOS, policy_loss

T = torch.tensor


# --- GAE ----------------------------------------------------------------------------------------
def test_gae_with_gamma_and_lambda_one_is_return_minus_value():
    rewards = T([[0.0, 0.0, 1.0]])
    values = T([[0.2, 0.5, 0.7]])
    adv, ret = gae(rewards, values, torch.ones(1, 3), gamma=1.0, lam=1.0)
    torch.testing.assert_close(adv, T([[0.8, 0.5, 0.3]]))  # R - V_t with R = 1
    torch.testing.assert_close(ret, T([[1.0, 1.0, 1.0]]))


def test_gae_with_lambda_zero_is_the_one_step_td_error():
    rewards = T([[0.1, 0.0, 1.0]])
    values = T([[0.2, 0.5, 0.7]])
    adv, ret = gae(rewards, values, torch.ones(1, 3), gamma=0.9, lam=0.0)
    # delta_t = r_t + 0.9 V_{t+1} - V_t; the state after the last token is terminal (V = 0)
    expected = T([[0.1 + 0.9 * 0.5 - 0.2, 0.0 + 0.9 * 0.7 - 0.5, 1.0 - 0.7]])
    torch.testing.assert_close(adv, expected)
    torch.testing.assert_close(ret, expected + values)


def test_gae_hand_computed_general_case():
    rewards, values = T([[0.0, 0.5, 1.0]]), T([[1.0, 2.0, 3.0]])
    adv, _ = gae(rewards, values, torch.ones(1, 3), gamma=0.5, lam=0.5)
    d2 = 1.0 - 3.0  # -2
    d1 = 0.5 + 0.5 * 3.0 - 2.0  # 0
    d0 = 0.0 + 0.5 * 2.0 - 1.0  # 0
    a2 = d2
    a1 = d1 + 0.25 * a2
    a0 = d0 + 0.25 * a1
    torch.testing.assert_close(adv, T([[a0, a1, a2]]))


def test_gae_ignores_padding_and_zeroes_it():
    values = T([[0.2, 0.5, 0.7, 0.0], [0.2, 0.5, 9.0, -9.0]])  # row 1: garbage on its padding
    rewards = T([[0.0, 0.0, 1.0, 0.0], [0.0, 1.0, 5.0, 5.0]])
    mask = T([[1, 1, 1, 0], [1, 1, 0, 0]])
    adv, ret = gae(rewards, values, mask, gamma=1.0, lam=0.95)
    short, _ = gae(T([[0.0, 1.0]]), T([[0.2, 0.5]]), torch.ones(1, 2), gamma=1.0, lam=0.95)
    full, _ = gae(rewards[:1, :3], values[:1, :3], torch.ones(1, 3), gamma=1.0, lam=0.95)
    torch.testing.assert_close(adv[1, :2], short[0])
    torch.testing.assert_close(adv[0, :3], full[0])
    assert adv[mask == 0].abs().sum() == 0 and ret[mask == 0].abs().sum() == 0


def test_gae_carries_value_and_advantage_through_a_masked_middle_token():
    # verl's convention: a masked (observation) token is skipped, not treated as terminal
    mask = T([[1.0, 0.0, 1.0]])
    adv, _ = gae(T([[0.0, 7.0, 1.0]]), T([[0.2, 9.0, 0.7]]), mask, gamma=1.0, lam=1.0)
    skipped, _ = gae(T([[0.0, 1.0]]), T([[0.2, 0.7]]), torch.ones(1, 2), gamma=1.0, lam=1.0)
    torch.testing.assert_close(adv[0, [0, 2]], skipped[0])
    assert adv[0, 1] == 0


def test_token_rewards_put_the_outcome_on_the_last_real_token_minus_kl():
    mask = T([[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]])
    kl = torch.full((3, 4), 0.1)
    r = token_rewards(T([1.0, 2.0, 3.0]), mask, kl)
    expected = T([[-0.1, -0.1, 0.9, 0.0], [1.9, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    torch.testing.assert_close(r, expected)
    torch.testing.assert_close(token_rewards(T([1.0, 2.0, 3.0]), mask).sum(-1), T([1.0, 2.0, 0.0]))


def test_masked_whiten_standardises_the_real_tokens_only():
    x = T([[1.0, 2.0, 100.0], [3.0, 4.0, -100.0]])
    mask = T([[1, 1, 0], [1, 1, 0]])
    w = masked_whiten(x, mask)
    real = w[mask.bool()]
    assert abs(float(real.mean())) < 1e-6
    assert float(real.std(correction=1)) == pytest.approx(1.0, abs=1e-6)
    assert w[~mask.bool()].abs().sum() == 0


# --- value loss ---------------------------------------------------------------------------------
def test_value_clip_bounds_the_move_from_old_values():
    old = T([[0.0, 0.0, 0.0]])
    values = T([[1.0, 0.1, 5.0]], requires_grad=True)
    returns = T([[1.0, 1.0, 0.0]])
    mask = T([[1.0, 1.0, 0.0]])  # the third token is padding
    loss, stats = value_loss(values, old, returns, mask, clip=0.2)
    # token 0: unclipped (1-1)² = 0, clipped (0.2-1)² = 0.64 → 0.64 (clipped wins)
    # token 1: inside the clip range → (0.1-1)² = 0.81 both ways
    assert float(loss.detach()) == pytest.approx(0.5 * (0.64 + 0.81) / 2)
    assert stats["critic/value_clip_frac"] == pytest.approx(0.5)
    assert stats["critic/value_mean"] == pytest.approx(0.55)
    loss.backward()
    # the clipped branch is flat in V: token 0 gets no gradient; token 1 gets 0.5·2·(V-R)/2
    torch.testing.assert_close(values.grad, T([[0.0, 0.5 * (0.1 - 1.0), 0.0]]))


def test_value_clip_off_is_the_plain_squared_error():
    old, values, returns = T([[0.0, 0.0]]), T([[1.0, 0.1]]), T([[1.0, 1.0]])
    loss, stats = value_loss(values, old, returns, torch.ones(1, 2), clip=None)
    assert float(loss) == pytest.approx(0.5 * (0.0 + 0.81) / 2)
    assert stats["critic/value_clip_frac"] == 0


def test_value_loss_is_aggregated_like_the_policy_loss():
    old = torch.zeros(2, 3)
    values = T([[1.0, 1.0, 1.0], [3.0, 0.0, 0.0]])
    returns = torch.zeros(2, 3)
    mask = T([[1, 1, 1], [1, 0, 0]])
    tok, _ = value_loss(values, old, returns, mask, clip=None, loss_agg="token_mean")
    seq, _ = value_loss(values, old, returns, mask, clip=None, loss_agg="seq_mean_token_mean")
    assert float(tok) == pytest.approx(0.5 * (3 * 1.0 + 9.0) / 4)
    assert float(seq) == pytest.approx(0.5 * (1.0 + 9.0) / 2)


# --- explained variance -------------------------------------------------------------------------
def test_explained_variance_on_constructed_cases():
    returns = T([[1.0, 2.0, 3.0, 99.0], [4.0, 5.0, 6.0, -99.0]])
    mask = T([[1, 1, 1, 0], [1, 1, 1, 0]])
    assert explained_variance(returns, returns, mask) == pytest.approx(1.0)
    assert explained_variance(returns + 2.0, returns, mask) == pytest.approx(1.0)  # offset only
    assert explained_variance(torch.full_like(returns, 3.5), returns, mask) == pytest.approx(0.0)
    # V = R - e with e = ±0.5 alternating: Var[e] = 0.25, Var[R] = 35/12 over the real tokens
    noise = T([[0.5, -0.5, 0.5, 0.0], [-0.5, 0.5, -0.5, 0.0]])
    expected = 1 - 0.25 / (35 / 12)
    assert explained_variance(returns - noise, returns, mask) == pytest.approx(expected, rel=1e-5)
    assert math.isnan(explained_variance(returns, torch.ones_like(returns), mask))


def test_value_head_starts_at_zero_without_drawing_random_numbers():
    torch.manual_seed(0)
    before = torch.rand(1)
    torch.manual_seed(0)
    head = value_head(16)
    assert torch.equal(torch.rand(1), before)  # common random numbers with the GRPO arms
    assert head(torch.randn(2, 5, 16)).shape == (2, 5)
    assert head(torch.randn(2, 5, 16)).abs().sum() == 0
    assert num_params(head) == 17


# --- per-token advantages in the policy loss ----------------------------------------------------
def _batch(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(4, 6, generator=g) - 0.1
    old = logp + 0.3 * torch.randn(4, 6, generator=g)
    mask = torch.ones(4, 6)
    mask[1, 4:] = 0
    mask[3, 2:] = 0
    adv = T([1.0, -0.5, 0.0, 2.0])
    return logp, old, adv, mask


@pytest.mark.filterwarnings("ignore:ratio_level=:UserWarning")
@pytest.mark.parametrize("level", RATIOS.names())
@pytest.mark.parametrize("mode", AGGREGATIONS.names())
def test_constant_per_token_advantages_equal_the_per_sequence_result(mode, level):
    logp, old, adv, mask = _batch()
    algo = Algorithm(
        loss_agg=mode,
        ratio_level=level,
        dual_clip=3.0,
        loss_norm_constant=6 if mode == "seq_mean_token_sum_norm" else None,
    )
    results = []
    for a in (adv, adv.unsqueeze(-1).expand(4, 6).clone()):
        x = logp.clone().requires_grad_(True)
        loss, stats = policy_loss(x, old, a, mask, algo, group_ids=torch.tensor([0, 0, 1, 1]))
        loss.backward()
        results.append((loss.detach(), stats, x.grad))
    torch.testing.assert_close(results[0][0], results[1][0])
    torch.testing.assert_close(results[0][2], results[1][2])
    assert results[0][1] == pytest.approx(results[1][1])


def test_per_token_advantages_weight_each_token():
    logp, _, _, mask = _batch()
    adv = torch.zeros(4, 6)
    adv[0, 0] = 4.0  # one token of one sequence carries all the signal
    loss, _ = policy_loss(logp, logp.detach(), adv, mask, Algorithm(loss_agg="token_mean"))
    assert float(loss) == pytest.approx(-4.0 / mask.sum().item())  # ratio 1: loss = -mean A


def test_advantages_of_another_shape_are_refused():
    logp, old, _, mask = _batch()
    with pytest.raises(ValueError, match=r"\[B\] or \[B, T\]"):
        policy_loss(logp, old, torch.zeros(4, 5), mask, Algorithm())
