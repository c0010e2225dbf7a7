"""Hand-computed values, invariants and autograd checks for ablate.factors.objective."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from ablate.factors.advantages import group_advantages
from ablate.factors.algorithms import Algorithm
from ablate.factors.objective import (
    AGGREGATIONS,
    KL_ESTIMATORS,
    RATIOS,
    clipped_surrogate,
    policy_loss,
)

BASE = Algorithm()

# Tests here combine sequence ratios with every aggregation on purpose.
pytestmark = pytest.mark.filterwarnings("ignore:ratio_level=:UserWarning")


def algo(**kw) -> Algorithm:
    return dataclasses.replace(BASE, **kw)


# --- aggregation ------------------------------------------------------------------------------
LOSS = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("token_mean", (1 + 2 + 4) / 3),
        ("seq_mean_token_mean", ((1 + 2) / 2 + 4 / 1) / 2),
        ("seq_mean_token_sum", ((1 + 2) + 4) / 2),
        ("seq_mean_token_sum_norm", ((1 + 2) + 4) / 2 / 4),
    ],
)
def test_aggregation_hand_computed(mode, expected):
    got = AGGREGATIONS.get(mode)(LOSS, MASK, 4)
    assert got.item() == pytest.approx(expected)


def test_norm_aggregation_needs_a_constant():
    with pytest.raises(ValueError, match="resolve"):
        AGGREGATIONS.get("seq_mean_token_sum_norm")(LOSS, MASK, None)


def test_fully_masked_row_is_not_counted_as_a_sequence():
    mask = torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    assert AGGREGATIONS.get("seq_mean_token_mean")(LOSS, mask, None).item() == pytest.approx(1.5)
    assert AGGREGATIONS.get("seq_mean_token_sum")(LOSS, mask, None).item() == pytest.approx(3.0)


def _loop_aggregate(mode, loss, mask, L, groups):
    rows = []
    for b in range(loss.shape[0]):
        toks = [loss[b, t].item() for t in range(loss.shape[1]) if mask[b, t] > 0]
        rows.append(toks)
    all_toks = [x for r in rows for x in r]
    nonempty = [r for r in rows if r]
    if mode == "token_mean":
        return sum(all_toks) / max(len(all_toks), 1)
    if mode == "seq_mean_token_mean":
        return sum(sum(r) / len(r) for r in nonempty) / max(len(nonempty), 1)
    if mode == "token_sum":
        return sum(all_toks)
    if mode == "prompt_mean":
        per_prompt = {}
        for b, r in enumerate(rows):
            per_prompt.setdefault(int(groups[b]), []).extend(r)
        means = [sum(t) / len(t) for t in per_prompt.values() if t]
        return sum(means) / max(len(means), 1)
    total = sum(sum(r) for r in nonempty) / max(len(nonempty), 1)
    return total if mode == "seq_mean_token_sum" else total / L


@pytest.mark.parametrize("mode", AGGREGATIONS.names())
def test_aggregation_matches_loop_reference(mode):
    g = torch.Generator().manual_seed(1)
    for _ in range(20):
        loss = torch.randn(5, 7, generator=g, dtype=torch.float64)
        mask = (torch.rand(5, 7, generator=g) < 0.6).double()
        groups = torch.tensor([3, 3, 0, 7, 7])  # ids need not be contiguous or sorted
        got = AGGREGATIONS.get(mode)(loss, mask, 9, groups).item()
        assert got == pytest.approx(_loop_aggregate(mode, loss, mask, 9, groups), abs=1e-12)


# --- advantages -------------------------------------------------------------------------------
def test_group_std_scaling_hand_computed():
    r = torch.tensor([1.0, 0.0, 0.0, 1.0])
    unbiased = group_advantages(r, 4, algo(std_unbiased=True, std_eps=0.0))
    population = group_advantages(r, 4, algo(std_unbiased=False, std_eps=0.0))
    # mean 0.5; sum of squares 1.0; unbiased std sqrt(1/3), population std 0.5
    assert unbiased.tolist() == pytest.approx(
        [0.5 / math.sqrt(1 / 3)] * 1 + [-0.5 / math.sqrt(1 / 3)] * 2 + [0.5 / math.sqrt(1 / 3)]
    )
    assert population.tolist() == pytest.approx([1.0, -1.0, -1.0, 1.0])
    with_eps = group_advantages(r, 4, algo(std_unbiased=False, std_eps=0.5))
    assert with_eps.tolist() == pytest.approx([0.5, -0.5, -0.5, 0.5])


def test_no_scaling_is_mean_centred():
    r = torch.tensor([3.0, 1.0, 0.0, 0.0, 2.0, 4.0])
    got = group_advantages(r, 3, algo(scale="none"))
    assert got.tolist() == pytest.approx([5 / 3, -1 / 3, -4 / 3, -2.0, 0.0, 2.0])


def test_batch_std_uses_group_mean_and_batch_std():
    r = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0])
    got = group_advantages(r, 4, algo(scale="batch_std", std_unbiased=False, std_eps=0.0))
    centred = [0.75, -0.25, -0.25, -0.25, 0.25, 0.25, 0.25, -0.75]
    assert got.tolist() == pytest.approx([c / 0.5 for c in centred])  # batch std of 4 ones, 4 zeros


def test_leave_one_out_is_g_over_g_minus_1_times_centred():
    g = torch.Generator().manual_seed(0)
    r = torch.rand(24, generator=g, dtype=torch.float64)
    loo = group_advantages(r, 6, algo(baseline="leave_one_out", scale="none"))
    centred = group_advantages(r, 6, algo(scale="none"))
    torch.testing.assert_close(loo, centred * 6 / 5)
    # and equals the definition r_i - mean_{j != i} r_j
    first = r[:6]
    assert loo[0].item() == pytest.approx((first[0] - first[1:].mean()).item())


def _loop_advantages(rewards, G, a):
    out = []
    for s in range(0, len(rewards), G):
        grp = rewards[s : s + G]
        mean = sum(grp) / G
        if a.baseline == "leave_one_out":
            cen = [x - (sum(grp) - x) / (G - 1) for x in grp]
        else:
            cen = [x - mean for x in grp]
        if len(set(grp)) == 1:
            cen = [0.0] * G
        if a.scale == "group_std":
            d = G - 1 if a.std_unbiased else G
            std = math.sqrt(sum((x - mean) ** 2 for x in grp) / d)
            cen = [c / (std + a.std_eps) if std + a.std_eps > 0 else 0.0 for c in cen]
        out.extend(cen)
    if a.scale == "batch_std":
        mu = sum(rewards) / len(rewards)
        d = len(rewards) - 1 if a.std_unbiased else len(rewards)
        std = math.sqrt(sum((x - mu) ** 2 for x in rewards) / d)
        out = [c / (std + a.std_eps) if std + a.std_eps > 0 else 0.0 for c in out]
    return out


@pytest.mark.parametrize("scale", ["group_std", "batch_std", "none"])
@pytest.mark.parametrize("baseline", ["group_mean", "leave_one_out"])
@pytest.mark.parametrize("unbiased", [True, False])
def test_advantages_match_loop_reference(scale, baseline, unbiased):
    std = {"std_unbiased": unbiased, "std_eps": 1e-4} if scale != "none" else {}  # else unread
    a = algo(scale=scale, baseline=baseline, **std)
    g = torch.Generator().manual_seed(3)
    for _ in range(10):
        r = (torch.rand(32, generator=g) < 0.4).double() * torch.rand(32, generator=g).double()
        got = group_advantages(r, 8, a).tolist()
        assert got == pytest.approx(_loop_advantages(r.tolist(), 8, a), abs=1e-10)


@pytest.mark.parametrize("scale", ["group_std", "batch_std", "none"])
def test_equal_rewards_give_exact_zero_not_nan(scale):
    r = torch.tensor(
        [0.1, 0.1, 0.1, 1.0, 1.0, 1.0]
    )  # 0.1 is inexact in float: rounding must not leak
    got = group_advantages(r, 3, algo(scale=scale, **({"std_eps": 0.0} if scale != "none" else {})))
    assert torch.equal(got, torch.zeros(6))


def test_batch_std_of_constant_batch_and_single_group_are_finite():
    assert torch.equal(
        group_advantages(torch.ones(8), 8, algo(scale="batch_std", std_eps=0.0)), torch.zeros(8)
    )
    one = group_advantages(torch.tensor([1.0, 0.0]), 2, algo())
    assert torch.isfinite(one).all() and one[0] > 0 > one[1]
    g1 = group_advantages(torch.tensor([1.0, 0.0]), 1, algo())  # groups of one: no signal
    assert torch.equal(g1, torch.zeros(2))


def test_bad_group_shape_is_refused():
    with pytest.raises(ValueError, match="groups of 3"):
        group_advantages(torch.ones(4), 3, algo())


# --- ratios -----------------------------------------------------------------------------------
def test_sequence_ratio_is_exp_of_mean_token_log_ratio_for_any_split():
    old = torch.zeros(2, 4)
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 0.0]])
    a = torch.tensor([[0.3, 0.0, 0.0, 9.0], [0.1, 0.1, 0.1, -9.0]])  # same total 0.3 over 3 tokens
    log_s = RATIOS.get("sequence")(a, old, mask)
    assert log_s[0, 0].item() == pytest.approx(0.1) and log_s[1, 0].item() == pytest.approx(0.1)
    assert torch.allclose(log_s[0], log_s[1])  # broadcast over the row; padding ignored
    adv = torch.tensor([1.0, 1.0])
    gspo = algo(ratio_level="sequence", minibatches=4, clip_low=0.5, clip_high=0.5)
    l0, _ = policy_loss(a[:1], old[:1], adv[:1], mask[:1], gspo)
    l1, _ = policy_loss(a[1:], old[1:], adv[1:], mask[1:], gspo)
    assert l0.item() == pytest.approx(l1.item()) == pytest.approx(-math.exp(0.1))


def test_gspo_token_equals_gspo_in_value_and_gradient():
    g = torch.Generator().manual_seed(7)
    old = torch.randn(4, 6, generator=g, dtype=torch.float64) * 0.1
    base = old + torch.randn(4, 6, generator=g, dtype=torch.float64) * 0.05
    rows = [[1.0] * 6, [1.0] * 3 + [0.0] * 3, [1.0] * 5 + [0.0], [1.0] + [0.0] * 5]
    mask = torch.tensor(rows, dtype=torch.float64)
    adv = torch.tensor([1.0, -0.5, 0.7, -1.2], dtype=torch.float64)
    grads, values = [], []
    for level in ("sequence", "sequence_token"):
        logp = base.clone().requires_grad_(True)
        a = algo(ratio_level=level, minibatches=4, clip_low=0.03, clip_high=0.04)
        loss, _ = policy_loss(logp, old, adv, mask, a)
        loss.backward()
        values.append(loss.item())
        grads.append(logp.grad.clone())
        ratio = RATIOS.get(level)(base, old, mask)
        values.append(ratio[mask > 0].tolist())
    assert values[0] == pytest.approx(values[2])
    assert values[1] == pytest.approx(values[3])
    torch.testing.assert_close(grads[0], grads[1])


# --- clipping ---------------------------------------------------------------------------------
def test_clip_higher_changes_only_the_positive_advantage_side():
    ratios = torch.linspace(0.5, 1.6, 23)
    log_r = ratios.log().unsqueeze(0).repeat(2, 1)
    adv = torch.tensor([[1.0], [-1.0]])
    sym = clipped_surrogate(log_r, adv, algo(clip_low=0.2, clip_high=0.2))
    hi = clipped_surrogate(log_r, adv, algo(clip_low=0.2, clip_high=0.28))
    assert torch.equal(sym[1], hi[1])  # A < 0: unchanged
    changed = (sym[0] != hi[0]).nonzero().flatten()
    assert len(changed) > 0
    assert (ratios[changed] > 1.2 - 1e-6).all()  # only above the old upper bound
    # with A > 0 the loss is -A * min(r, 1 + eps_high)
    torch.testing.assert_close(hi[0], -ratios.clamp(max=1.28))


def test_dual_clip_bounds_the_loss_for_negative_advantages():
    log_r = torch.tensor([[math.log(0.5), 0.0, math.log(2.0), math.log(5.0), math.log(50.0)]])
    adv = torch.tensor([[-2.0]])
    plain = clipped_surrogate(log_r, adv, algo())
    dual = clipped_surrogate(log_r, adv, algo(dual_clip=3.0))
    assert plain[0, -1].item() == pytest.approx(100.0)  # unbounded without dual clip: -A * r
    assert dual[0].tolist() == pytest.approx([1.6, 2.0, 4.0, 6.0, 6.0])  # capped at -A * c = 6
    pos = clipped_surrogate(log_r, torch.tensor([[2.0]]), algo(dual_clip=3.0))
    assert torch.equal(pos, clipped_surrogate(log_r, torch.tensor([[2.0]]), algo()))


# --- KL estimators ----------------------------------------------------------------------------
def test_kl_estimators_hand_computed():
    logp, ref = torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.25)])
    lr = math.log(0.5)  # log(pi_ref / pi)
    assert KL_ESTIMATORS.get("k1")(logp, ref).item() == pytest.approx(-lr)
    assert KL_ESTIMATORS.get("k2")(logp, ref).item() == pytest.approx(0.5 * lr**2)
    assert KL_ESTIMATORS.get("k3")(logp, ref).item() == pytest.approx(0.5 - 1 - lr)


def test_k3_is_nonnegative_and_zero_when_policies_match():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(1000, generator=g), torch.randn(1000, generator=g)
    assert (KL_ESTIMATORS.get("k3")(a, b) >= 0).all()
    for name in KL_ESTIMATORS.names():
        assert torch.equal(KL_ESTIMATORS.get(name)(a, a), torch.zeros(1000))


# --- the composed loss ------------------------------------------------------------------------
def _weights(mode, mask, L, groups):
    n_rows = (mask.sum(-1) > 0).sum()
    if mode == "token_mean":
        return mask / mask.sum()
    if mode == "token_sum":
        return mask
    if mode == "prompt_mean":  # a token's weight: 1 / (its group's tokens · the prompts)
        tokens = torch.stack([mask[groups == g].sum() for g in groups])
        return mask / tokens.unsqueeze(-1) / len(set(groups.tolist()))
    if mode == "seq_mean_token_mean":
        return mask / mask.sum(-1, keepdim=True).clamp(min=1) / n_rows
    if mode == "seq_mean_token_sum":
        return mask / n_rows
    return mask / n_rows / L


@pytest.mark.parametrize("mode", AGGREGATIONS.names())
@pytest.mark.parametrize("level", ["token", "sequence_token"])
def test_gradient_at_ratio_one_is_reinforce_weighted_by_aggregation(mode, level):
    g = torch.Generator().manual_seed(11)
    old = torch.randn(4, 5, generator=g, dtype=torch.float64)
    logp = old.clone().requires_grad_(True)
    mask = torch.tensor(
        [[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 0, 0, 0, 0], [1, 1, 1, 0, 0]]
    ).double()
    adv = torch.tensor([0.5, -1.0, 2.0, -0.25], dtype=torch.float64)
    a = algo(
        loss_agg=mode,
        loss_norm_constant=8 if mode == "seq_mean_token_sum_norm" else None,
        ratio_level=level,
        minibatches=2,
    )
    groups = torch.tensor([0, 1, 0, 1])
    loss, stats = policy_loss(logp, old, adv, mask, a, group_ids=groups)
    loss.backward()
    expected = -adv.unsqueeze(-1) * _weights(mode, mask, 8, groups)
    torch.testing.assert_close(logp.grad, expected)
    assert stats["clip_frac"] == 0.0 and stats["ratio_mean"] == pytest.approx(1.0)


def _loop_token_loss(logp, old, adv, mask, a):
    per_row = []
    for b in range(len(logp)):
        terms = []
        for t in range(len(logp[b])):
            if mask[b][t] == 0:
                continue
            r = math.exp(logp[b][t] - old[b][t])
            A = adv[b]
            terms.append(max(-A * r, -A * min(max(r, 1 - a.clip_low), 1 + a.clip_high)))
        per_row.append(terms)
    return per_row


def test_token_level_loss_matches_loop_reference():
    g = torch.Generator().manual_seed(5)
    a = algo(clip_low=0.1, clip_high=0.15, loss_agg="token_mean")
    for _ in range(10):
        old = torch.randn(6, 8, generator=g, dtype=torch.float64)
        logp = old + 0.3 * torch.randn(6, 8, generator=g, dtype=torch.float64)
        mask = (torch.rand(6, 8, generator=g) < 0.7).double()
        adv = torch.randn(6, generator=g, dtype=torch.float64)
        loss, _ = policy_loss(logp, old, adv, mask, a)
        rows = _loop_token_loss(logp.tolist(), old.tolist(), adv.tolist(), mask.tolist(), a)
        toks = [x for r in rows for x in r]
        assert loss.item() == pytest.approx(sum(toks) / len(toks), abs=1e-12)


def test_clip_fraction_statistics_on_constructed_ratios():
    ratios = torch.tensor([[0.7, 1.0, 1.3, 1.0], [0.7, 1.3, 1.0, 1.0]])
    old = torch.zeros(2, 4)
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    adv = torch.tensor([1.0, -1.0])
    _, s = policy_loss(ratios.log(), old, adv, mask, algo(dual_clip=1.2, minibatches=2))
    # 7 tokens; A>0 row: 1.3 clipped high; A<0 row: 0.7 clipped low, 1.3 > dual c=1.2
    assert s["clip_frac_high"] == pytest.approx(1 / 7)
    assert s["clip_frac_low"] == pytest.approx(1 / 7)
    assert s["clip_frac"] == pytest.approx(2 / 7)
    assert s["dual_clip_frac"] == pytest.approx(1 / 7)
    assert s["ratio_max"] == pytest.approx(1.3) and s["ratio_min"] == pytest.approx(0.7)
    assert s["ratio_mean"] == pytest.approx((0.7 + 1 + 1.3 + 0.7 + 1.3 + 1 + 1) / 7)


def test_kl_in_loss_is_added_per_token_before_aggregation():
    g = torch.Generator().manual_seed(2)
    old = torch.randn(3, 4, generator=g)
    ref = old + 0.2 * torch.randn(3, 4, generator=g)
    mask = torch.tensor([[1.0, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]])
    adv = torch.tensor([1.0, -1.0, 0.5])
    plain, _ = policy_loss(old, old, adv, mask, algo())
    with_kl, s = policy_loss(old, old, adv, mask, algo(kl_coef=0.1), ref_logp=ref)
    kl_agg = AGGREGATIONS.get("seq_mean_token_mean")(KL_ESTIMATORS.get("k3")(old, ref), mask, None)
    assert with_kl.item() == pytest.approx(plain.item() + 0.1 * kl_agg.item(), rel=1e-6)
    assert s["kl_ref"] > 0
    in_reward, s2 = policy_loss(
        old, old, adv, mask, algo(kl_coef=0.1, kl_in="reward"), ref_logp=ref
    )
    assert in_reward.item() == pytest.approx(plain.item()) and s2["kl_ref"] == pytest.approx(
        s["kl_ref"]
    )
    with pytest.raises(ValueError, match="ref_logp"):
        policy_loss(old, old, adv, mask, algo(kl_coef=0.1))


def test_entropy_bonus_is_subtracted():
    old = torch.zeros(2, 3)
    mask = torch.ones(2, 3)
    ent = torch.full((2, 3), 2.0)
    adv = torch.tensor([1.0, -1.0])
    plain, _ = policy_loss(old, old, adv, mask, algo(), entropy=ent)
    bonus, s = policy_loss(old, old, adv, mask, algo(entropy_coef=0.05), entropy=ent)
    assert bonus.item() == pytest.approx(plain.item() - 0.1)
    assert s["entropy"] == pytest.approx(2.0)


@pytest.mark.parametrize("mode", AGGREGATIONS.names())
@pytest.mark.parametrize("level", RATIOS.names())
def test_degenerate_inputs_are_finite(mode, level):
    a = algo(
        loss_agg=mode,
        loss_norm_constant=4 if mode.endswith("norm") else None,
        ratio_level=level,
        minibatches=2,
    )
    z = torch.zeros(2, 4, requires_grad=True)
    for mask in (torch.zeros(2, 4), torch.tensor([[1.0, 1, 0, 0], [0, 0, 0, 0]])):
        adv, groups = torch.tensor([1.0, -1.0]), torch.tensor([0, 1])
        loss, stats = policy_loss(z, torch.zeros(2, 4), adv, mask, a, group_ids=groups)
        loss.backward()
        assert math.isfinite(loss.item()) and torch.isfinite(z.grad).all()
        assert all(math.isfinite(v) for v in stats.values())


def test_extreme_log_ratios_do_not_produce_nan_gradients():
    logp = torch.tensor([[200.0, -200.0]], requires_grad=True)
    loss, _ = policy_loss(logp, torch.zeros(1, 2), torch.tensor([-1.0]), torch.ones(1, 2), algo())
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logp.grad).all()


def test_shape_mismatch_is_refused():
    with pytest.raises(ValueError, match="advantages"):
        policy_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(3), torch.ones(2, 3), algo())
    with pytest.raises(ValueError, match="mask"):
        policy_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2), torch.ones(2, 4), algo())
