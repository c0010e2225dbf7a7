"""The 2026 factor levels: MaxRL's mean scale, DPPO's trust regions, advantage-sign weighting and
the reward floor. Hand-computed values, a loop reference of verl's DPPO formulas (values and
gradients, every aggregation), and the checks that refuse what a level does not read.
(`python -m devtools verl-parity` compares the DPPO losses with verl 0.9.1 itself.)"""

from __future__ import annotations

import math

import pytest
import torch

from ablate.base.errors import ConfigError
from ablate.factors.advantages import group_advantages
from ablate.factors.algorithms import Algorithm
from ablate.factors.objective import AGGREGATIONS, policy_loss
from ablate.stages.shaping import floor_rewards


# --- MaxRL ---------------------------------------------------------------------------------------
def test_mean_scale_divides_the_centred_reward_by_the_group_mean():
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0], dtype=torch.float64)
    adv = group_advantages(rewards, 4, Algorithm(scale="mean", std_eps=0.0))
    # group 1: mean 0.5 -> (1 - 0.5) / 0.5 = 1, (0 - 0.5) / 0.5 = -1
    # group 2: mean 0.75 -> 0.25 / 0.75 = 1/3, -0.75 / 0.75 = -1
    expected = [1.0, -1.0, -1.0, 1.0, 1 / 3, 1 / 3, 1 / 3, -1.0]
    assert adv.tolist() == pytest.approx(expected, abs=1e-12)


def test_mean_scale_adds_the_epsilon_to_the_mean():
    adv = group_advantages(torch.tensor([1.0, 0.0]), 2, Algorithm(scale="mean", std_eps=0.5))
    assert adv.tolist() == pytest.approx([0.5 / 1.0, -0.5 / 1.0])


def test_mean_scale_is_zero_for_a_group_whose_mean_is_not_positive():
    # all wrong (mean 0), and a floored group whose mean is negative: dividing by it would flip
    # the advantages' signs
    rewards = torch.tensor([0.0, 0.0, -1.0, -1.0, -1.0, 1.0])
    adv = group_advantages(rewards, 3, Algorithm(scale="mean"))
    assert adv.tolist() == [0.0] * 6
    assert torch.isfinite(group_advantages(rewards, 3, Algorithm(scale="mean", std_eps=0.0))).all()


def test_maxrl_weighs_hard_prompts_by_one_over_the_pass_rate():
    # a correct sample's advantage is (1 - p) / p: 1/p - 1, so a 1-in-8 prompt's success
    # counts 7, a 7-in-8 prompt's 1/7
    hard = torch.tensor([1.0] + [0.0] * 7)
    easy = torch.tensor([1.0] * 7 + [0.0])
    algo = Algorithm(scale="mean", std_eps=0.0)
    assert group_advantages(hard, 8, algo)[0].item() == pytest.approx(7.0)
    assert group_advantages(easy, 8, algo)[0].item() == pytest.approx(1 / 7)


# --- advantage-sign weighting and the reward floor ------------------------------------------------
def test_positive_weight_scales_positive_advantages_only():
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0])
    plain = group_advantages(rewards, 4, Algorithm(scale="none"))
    weighted = group_advantages(rewards, 4, Algorithm(scale="none", positive_weight=0.1))
    assert weighted.tolist() == pytest.approx([0.05, -0.5, -0.5, 0.05])
    assert plain.tolist() == pytest.approx([0.5, -0.5, -0.5, 0.5])


def test_reward_floor_maps_zero_one_rewards_onto_floor_one():
    scores = torch.tensor([0.0, 1.0, 0.5])
    assert floor_rewards(scores, -1.0).tolist() == [-1.0, 1.0, 0.0]
    assert floor_rewards(scores, 0.0).tolist() == scores.tolist()


def test_w_reinforce_advantages_are_the_authors():
    # RLVR-Decomposed's "weighted" advantage from 0/1 scores: λ for a correct sample, 0 - 1 for a
    # wrong one (no baseline, no std), here with λ = 0.1
    from ablate.baselines import baseline

    algo = baseline("w_reinforce")
    scores = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    adv = group_advantages(floor_rewards(scores, algo.reward_floor), 4, algo)
    authors = [0.1 if s == 1 else s - 1 for s in scores.tolist()]
    assert adv.tolist() == pytest.approx(authors)


# --- DPPO: hand values ----------------------------------------------------------------------------
def _one_token(p_old: float, p: float, adv: float, **fields):
    logp = torch.tensor([[math.log(p)]], dtype=torch.float64, requires_grad=True)
    old = torch.tensor([[math.log(p_old)]], dtype=torch.float64)
    algo = Algorithm(loss_agg="token_mean", **fields)
    loss, stats = policy_loss(
        logp, old, torch.tensor([adv], dtype=torch.float64), torch.ones(1, 1), algo
    )
    loss.backward()
    return loss.item(), logp.grad.item(), stats


def test_dppo_tv_masks_a_rise_beyond_the_threshold_for_a_positive_advantage():
    tv = {"trust_region": "dppo_tv", "clip_low": 0.15, "clip_high": 0.15}
    loss, grad, stats = _one_token(0.5, 0.7, +1.0, **tv)  # π rose by 0.2 > 0.15
    assert (loss, grad, stats["trust_region_masked_frac"]) == (0.0, 0.0, 1.0)
    # the same rise with A < 0 moves against the advantage's push: kept, weight r = 1.4
    loss, grad, stats = _one_token(0.5, 0.7, -1.0, **tv)
    assert loss == pytest.approx(1.4 * math.log(0.7))
    assert grad == pytest.approx(1.4)
    assert stats["trust_region_masked_frac"] == 0.0


def test_dppo_caps_the_detached_ratio():
    tv = {"trust_region": "dppo_tv", "clip_low": 0.15, "clip_high": 0.15, "ratio_cap": 1.2}
    loss, grad, stats = _one_token(0.5, 0.7, -1.0, **tv)
    assert (loss, grad) == (pytest.approx(1.2 * math.log(0.7)), pytest.approx(1.2))
    assert stats["ratio_capped_frac"] == 1.0


def test_dppo_kl_masks_only_beyond_the_binary_kl_and_in_the_advantages_direction():
    kl = {"trust_region": "dppo_kl", "clip_low": 0.05, "clip_high": 0.05}
    # KL(Bern(0.5) || Bern(0.7)) = 0.5 log(0.5/0.7) + 0.5 log(0.5/0.3) = 0.0872 > 0.05
    assert _one_token(0.5, 0.7, +1.0, **kl)[1] == 0.0  # rose with A > 0: masked
    assert _one_token(0.5, 0.3, +1.0, **kl)[1] == pytest.approx(-0.6)  # fell: kept, -A·r
    assert _one_token(0.5, 0.3, -1.0, **kl)[1] == 0.0  # fell with A < 0: masked
    # a small move stays inside: KL(0.5 || 0.55) = 0.005 <= 0.05
    assert _one_token(0.5, 0.55, +1.0, **kl)[1] == pytest.approx(-1.1)


# --- DPPO: loop reference of verl's formulas, every aggregation ----------------------------------
def _batch(seed: int, b: int = 6, t: int = 7):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(b, t, generator=g, dtype=torch.float64) * 2
    # log-probabilities of a distribution: <= 0 (the binary KL takes log(1 - π))
    logp = (old + 0.4 * torch.randn(b, t, generator=g, dtype=torch.float64)).clamp(max=-1e-3)
    lengths = torch.randint(1, t + 1, (b,), generator=g)
    mask = (torch.arange(t) < lengths.unsqueeze(-1)).double()
    adv = torch.randn(b, generator=g, dtype=torch.float64)
    return logp, old, mask, adv


def _loop_dppo(region, logp, old, adv, a):
    """{(b, t): (loss, d loss / d logp)} from verl's dppo formulas, one float at a time."""
    out = {}
    for b in range(len(logp)):
        for t in range(len(logp[b])):
            lp, lo, A = logp[b][t], old[b][t], adv[b]
            p, po = math.exp(lp), math.exp(lo)
            if region == "dppo_tv":
                valid = (p - po <= a.clip_high) if A > 0 else (p - po >= -a.clip_low)
            else:
                bkl = po * (lo - lp) + (1 - po) * math.log((1 - po + 1e-8) / (1 - p + 1e-8))
                valid = (bkl <= a.clip_high or p <= po) if A > 0 else (bkl <= a.clip_low or p >= po)
            w = min(math.exp(lp - lo), a.ratio_cap) if valid else 0.0
            out[b, t] = (-A * w * lp, -A * w)
    return out


@pytest.mark.parametrize("region", ["dppo_tv", "dppo_kl"])
@pytest.mark.parametrize("agg", AGGREGATIONS.names())
def test_dppo_matches_the_loop_reference_in_value_and_gradient(region, agg):
    logp, old, mask, adv = _batch(3)
    norm = 7 if agg == "seq_mean_token_sum_norm" else None
    bounds = {"dppo_tv": (0.15, 0.1), "dppo_kl": (0.05, 0.03)}[region]
    algo = Algorithm(
        trust_region=region,
        clip_low=bounds[0],
        clip_high=bounds[1],
        ratio_cap=1.5,
        loss_agg=agg,
        loss_norm_constant=norm,
    )
    x = logp.clone().requires_grad_(True)
    groups = torch.tensor([0, 0, 1, 1, 2, 2])
    loss, stats = policy_loss(x, old, adv, mask, algo, group_ids=groups)
    loss.backward()
    assert 0 < stats["trust_region_masked_frac"] < 1 and stats["ratio_capped_frac"] > 0
    ref = _loop_dppo(region, logp.tolist(), old.tolist(), adv.tolist(), algo)
    tok_loss = torch.tensor([[ref[b, t][0] for t in range(7)] for b in range(6)], dtype=x.dtype)
    tok_grad = torch.tensor([[ref[b, t][1] for t in range(7)] for b in range(6)], dtype=x.dtype)
    # the aggregation is linear in the token losses: its weights are its gradient at any input
    probe = torch.zeros_like(x, requires_grad=True)
    AGGREGATIONS.get(agg)(probe, mask, norm, groups).backward()
    weights = probe.grad
    assert loss.item() == pytest.approx(float((weights * tok_loss).sum()), abs=1e-12)
    torch.testing.assert_close(x.grad, weights * tok_grad, atol=1e-12, rtol=0)


def test_ratio_clip_is_todays_clip_surrogate():
    logp, old, mask, adv = _batch(4)
    a, b = Algorithm(), Algorithm(trust_region="ratio_clip")
    assert (
        policy_loss(logp, old, adv, mask, a)[0].item()
        == policy_loss(logp, old, adv, mask, b)[0].item()
    )


# --- the checks -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"trust_region": "dppo_tv", "dual_clip": 3.0}, "dual_clip=3.0 does nothing"),
        ({"ratio_cap": 2.0}, "ratio_cap=2.0 does nothing"),
        ({"surrogate": "cispo", "clip_low": 1.0, "trust_region": "dppo_kl"}, "trust_region="),
        ({"advantage": "gae", "positive_weight": 0.5}, "positive_weight=0.5 does nothing"),
        ({"scale": "mean", "std_unbiased": False}, "std_unbiased=False does nothing"),
        (
            {"trust_region": "dppo_tv", "ratio_level": "sequence", "minibatches": 4},
            "ratio_level='token'",
        ),
        ({"positive_weight": -0.1}, "positive_weight=-0.1 must be"),
        ({"reward_floor": 1.0}, "reward_floor=1.0 must be"),
        ({"trust_region": "dppo_tv", "clip_low": 0.0}, "clip_low=0.0 must be a number > 0"),
        ({"trust_region": "dppo_kl", "ratio_cap": 0.5}, "ratio_cap=0.5 must be"),
    ],
)
def test_the_checks_refuse_what_a_level_does_not_read_or_accept(fields, named):
    with pytest.raises(ConfigError, match=named.replace("(", r"\(").replace("'", "'")):
        Algorithm(**fields)
