"""The 2025-26 surrogates, advantages, aggregations and rollout correction: hand-computed values,
loop references written from the papers' formulas, finite-difference gradients and invariants.
(`python -m devtools verl-parity` compares the same functions with verl 0.9.1 itself.)"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from ablate.factors.advantages import SCALES, group_advantages
from ablate.factors.algorithms import Algorithm
from ablate.factors.objective import AGGREGATIONS, FACTORS, TRUST_REGIONS, policy_loss
from ablate.factors.surrogates import SURROGATES

SETTINGS = {
    "clip": {"clip_high": 0.28},
    "cispo": {"clip_low": 1.0, "clip_high": 0.3},
    "sapo": {"sapo_tau_pos": 1.0, "sapo_tau_neg": 1.05},
    "gmpo": {"clip_low": 0.2, "clip_high": 0.2},
    "clip_cov": {"cov_fraction": 1.0, "cov_clip_low": 0.05, "cov_clip_high": 0.5},
    "kl_cov": {"cov_fraction": 0.25, "kl_cov_coef": 0.5},
}


def _batch(seed: int, b: int = 4, t: int = 5):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(b, t, generator=g, dtype=torch.float64) * 2
    logp = old + 0.3 * torch.randn(b, t, generator=g, dtype=torch.float64)
    lengths = torch.randint(1, t + 1, (b,), generator=g)
    mask = (torch.arange(t) < lengths.unsqueeze(-1)).double()
    adv = torch.randn(b, generator=g, dtype=torch.float64)
    return logp, old, mask, adv


# --- loop references: one python float at a time, from each paper's formula ----------------------
def _tokens(mask):
    return [(b, t) for b in range(len(mask)) for t in range(len(mask[b])) if mask[b][t] > 0]


def _cov(logp, adv, mask):
    toks = _tokens(mask)
    a_mean = sum(adv[b] for b, _ in toks) / len(toks)
    l_mean = sum(logp[b][t] for b, t in toks) / len(toks)
    return {(b, t): (adv[b] - a_mean) * (logp[b][t] - l_mean) for b, t in toks}


def _ppo(x, adv, a):
    r = math.exp(x)
    return max(-adv * r, -adv * min(max(r, 1 - a.clip_low), 1 + a.clip_high))


def loop_token_losses(name, logp, old, mask, adv, a, weight_logp=None):
    """{(b, t): loss}; GMPO's per-sequence loss is given to each of its tokens. CISPO's weight is
    a stop-gradient: `weight_logp` holds it fixed while `logp` moves."""
    out, toks = {}, _tokens(mask)
    weight_logp = logp if weight_logp is None else weight_logp
    for b, t in toks:
        x, A = logp[b][t] - old[b][t], adv[b]
        r = math.exp(x)
        if name in ("clip", "clip_cov"):
            out[b, t] = _ppo(x, A, a)
        elif name == "cispo":  # MiniMax-M1 §3.1: value sg(clip(r))·A·log π
            w = math.exp(weight_logp[b][t] - old[b][t])
            out[b, t] = -min(max(w, 1 - a.clip_low), 1 + a.clip_high) * A * logp[b][t]
        elif name == "sapo":
            tau = a.sapo_tau_pos if A > 0 else a.sapo_tau_neg
            out[b, t] = -A * 4 / tau / (1 + math.exp(-tau * (r - 1)))
        elif name == "kl_cov":
            out[b, t] = -A * r
    if name == "gmpo":
        for b in {b for b, _ in toks}:
            xs = [logp[b][t] - old[b][t] for bb, t in toks if bb == b]
            lo, hi = -a.clip_low, a.clip_high
            kept = [min(x, min(max(x, lo), hi)) if adv[b] > 0 else max(x, min(max(x, lo), hi))
                    for x in xs]  # fmt: skip
            n = len(kept) + 1e-8  # verl's empty-row guard, in both means
            loss = -(adv[b] * len(kept) / n) * math.exp(sum(kept) / n)
            out.update({(bb, t): loss for bb, t in toks if bb == b})
    cov = _cov(logp, adv, mask)
    if name == "clip_cov":  # cov_fraction=1: every eligible token is detached
        for k, c in cov.items():
            unclipped = -adv[k[0]] * math.exp(logp[k[0]][k[1]] - old[k[0]][k[1]])
            if a.cov_clip_low < c < a.cov_clip_high and not out[k] > unclipped:
                out[k] = 0.0
    if name == "kl_cov":
        top = sorted(cov, key=cov.get, reverse=True)[: max(1, int(len(cov) * a.cov_fraction))]
        for b, t in top:
            out[b, t] += a.kl_cov_coef * abs(logp[b][t] - old[b][t])
    return out


def loop_seq_mean_token_mean(losses, mask):
    rows = sorted({b for b, _ in losses})
    return sum(
        sum(v for (bb, _), v in losses.items() if bb == b) / mask[b].sum().item() for b in rows
    ) / len(rows)


@pytest.mark.parametrize("name", SURROGATES.names())
def test_surrogate_matches_loop_reference_value_and_finite_difference_gradient(name):
    for seed in range(3):
        logp, old, mask, adv = _batch(seed)
        a = Algorithm(surrogate=name, **SETTINGS[name])
        x = logp.clone().requires_grad_(True)
        loss, _ = policy_loss(x, old, adv, mask, a)
        loss.backward()
        args = (old.tolist(), mask, adv.tolist(), a, logp.tolist())

        def reference(lp, args=args):
            return loop_seq_mean_token_mean(loop_token_losses(name, lp.tolist(), *args), args[1])

        assert loss.item() == pytest.approx(reference(logp), abs=1e-12)
        h, grad = 1e-6, torch.zeros_like(logp)
        for b, t in _tokens(mask):
            up, down = logp.clone(), logp.clone()
            up[b, t] += h
            down[b, t] -= h
            grad[b, t] = (reference(up) - reference(down)) / (2 * h)
        if name in ("clip_cov", "kl_cov"):  # the selection is a step function: compare off it
            grad = torch.where(x.grad == 0, torch.zeros_like(grad), grad)
        torch.testing.assert_close(x.grad, grad, atol=1e-6, rtol=1e-5)


class Reads:
    """An algorithm that records which of its fields are read."""

    def __init__(self, algo: Algorithm) -> None:
        self._algo, self.read = algo, set()

    def __getattr__(self, name: str):
        self.read.add(name)
        return getattr(self._algo, name)


def _declared(registry, name) -> set[str]:
    return {rule.field for rule in registry.reads(name)}


@pytest.mark.parametrize("name", SURROGATES.names())
def test_each_surrogate_reads_exactly_the_fields_it_declares(name):
    logp, old, mask, adv = _batch(0)
    algo = Reads(Algorithm(surrogate=name, **SETTINGS[name]))
    SURROGATES.get(name)(logp, logp - old, adv.unsqueeze(-1), mask, algo)
    # clip_cov shares the clipped surrogate's code, which looks at dual_clip: clip_cov does not
    # read it (like verl's), so the checks keep it None there
    extra = {"dual_clip"} if name == "clip_cov" else set()
    declared = _declared(SURROGATES, name)
    if name == "clip":  # it declares every trust region's fields; the default region reads its own
        declared = _declared(TRUST_REGIONS, "ratio_clip") | {"trust_region"}
    assert algo.read == declared | extra


@pytest.mark.parametrize("name", SCALES.names())
def test_each_scale_reads_exactly_the_fields_it_declares(name):
    rewards = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    algo = Reads(Algorithm(scale=name, baseline="none" if name == "token_whiten" else "group_mean"))
    SCALES.get(name)(rewards - rewards.mean(), rewards, torch.full((2, 3), 4), algo)
    assert algo.read == _declared(SCALES, name)


def test_every_declared_field_is_an_algorithm_field():
    names = {f.name for f in dataclasses.fields(Algorithm)}
    for registry in FACTORS.values():
        assert set(registry.fields_read()) <= names, registry.factor


@pytest.mark.parametrize("name", SURROGATES.names())
def test_clip_fractions_come_from_the_clip_family_only(name):
    logp, old, mask, adv = _batch(1)
    _, stats = policy_loss(logp, old, adv, mask, Algorithm(surrogate=name, **SETTINGS[name]))
    keys = {"clip_frac_low", "clip_frac_high", "clip_frac", "dual_clip_frac"}
    # the others' clip (cispo's weight, gmpo's log-ratio) have their own statistics
    assert keys <= stats.keys() if name in ("clip", "clip_cov") else not keys & stats.keys()
    assert {"ratio_mean", "ratio_var", "kl_old"} <= stats.keys()  # every surrogate's


def test_clip_cov_reports_the_clip_fractions_of_its_clipped_surrogate():
    logp, old, mask, adv = _batch(2, b=6, t=6)
    a = Algorithm(surrogate="clip_cov", clip_low=0.1, clip_high=0.1)
    _, cov = policy_loss(logp, old, adv, mask, a)
    _, clip = policy_loss(logp, old, adv, mask, Algorithm(clip_low=0.1, clip_high=0.1))
    for key in ("clip_frac_low", "clip_frac_high", "clip_frac", "dual_clip_frac"):
        assert cov[key] == clip[key]
    assert clip["clip_frac"] > 0


def test_cispo_keeps_the_gradient_of_a_clipped_token():
    # r = 2, A = 1, clip_high 0.2: PPO's clipped token has no gradient; CISPO's has -1.2
    old = torch.zeros(1, 1, dtype=torch.float64)
    mask, adv = torch.ones(1, 1, dtype=torch.float64), torch.tensor([1.0], dtype=torch.float64)
    grads = {}
    for name in ("clip", "cispo"):
        x = torch.full((1, 1), math.log(2.0), dtype=torch.float64, requires_grad=True)
        loss, stats = policy_loss(x, old, adv, mask, Algorithm(surrogate=name))
        loss.backward()
        grads[name] = x.grad.item()
        if name == "cispo":
            assert loss.item() == pytest.approx(-1.2 * math.log(2.0))
            assert stats["is_weight_truncated_frac"] == 1.0
    assert grads == {"clip": 0.0, "cispo": pytest.approx(-1.2)}


@pytest.mark.parametrize("adv", [1.0, -2.0])
def test_sapo_gate_has_slope_one_at_ratio_one(adv):
    x = torch.zeros(1, 1, dtype=torch.float64, requires_grad=True)
    a = Algorithm(surrogate="sapo", sapo_tau_pos=1.0, sapo_tau_neg=2.0)
    loss, stats = policy_loss(x, x.detach(), torch.tensor([adv]), torch.ones(1, 1), a)
    loss.backward()
    tau = 1.0 if adv > 0 else 2.0
    assert loss.item() == pytest.approx(-adv * 2 / tau)  # σ(0)·4/τ = 2/τ
    assert x.grad.item() == pytest.approx(-adv)  # like the unclipped surrogate at r = 1
    assert stats["sapo_gate_mean"] == pytest.approx(2 / tau)


def test_gmpo_clips_each_token_in_log_space_on_the_pessimistic_side():
    old, mask = torch.zeros(1, 2), torch.ones(1, 2)
    x = torch.tensor([[0.1, 0.3]])
    a = Algorithm(surrogate="gmpo", clip_low=0.2, clip_high=0.2)
    pos, _ = policy_loss(x, old, torch.tensor([1.0]), mask, a)
    neg, _ = policy_loss(x, old, torch.tensor([-1.0]), mask, a)
    assert pos.item() == pytest.approx(-math.exp((0.1 + 0.2) / 2))  # 0.3 clipped to 0.2
    assert neg.item() == pytest.approx(math.exp((0.1 + 0.3) / 2))  # A < 0: the larger kept


def test_clip_cov_detaches_eligible_unclipped_tokens_only_and_is_seeded():
    logp, old, mask, adv = _batch(7, b=8, t=6)
    a = Algorithm(surrogate="clip_cov", cov_fraction=0.1, cov_clip_low=0.0, cov_clip_high=9.0)
    picks = []
    for _ in range(2):
        torch.manual_seed(3)
        x = logp.clone().requires_grad_(True)
        loss, _ = policy_loss(x, old, adv, mask, a)
        loss.backward()
        picks.append((x.grad == 0) & (mask > 0))
    assert torch.equal(picks[0], picks[1])  # the same torch seed picks the same tokens
    n_tok = int(mask.sum())
    clipped_by_ppo = _clipped(logp, old, adv, mask)
    detached = picks[0] & ~clipped_by_ppo
    assert int(detached.sum()) == max(int(0.1 * n_tok), 1)
    cov = _cov(logp.tolist(), adv.tolist(), mask)
    assert all(cov[b, t] > 0 for b, t in detached.nonzero().tolist())


def _clipped(logp, old, adv, mask):
    r = torch.exp(logp - old)
    a = adv.unsqueeze(-1)
    return ((-a * r.clamp(0.8, 1.2)) > (-a * r)) & (mask > 0)


def test_kl_cov_penalises_the_top_covariance_token():
    # adv 1 and -1; log π of the first sequence's first token far above the rest: the largest
    # (A - mean A)(log π - mean log π) is that token's
    logp = torch.tensor([[0.0, -2.0], [-2.0, -2.0]], dtype=torch.float64)
    old = logp - 0.1
    adv, mask = torch.tensor([1.0, -1.0], dtype=torch.float64), torch.ones(2, 2)
    a = Algorithm(surrogate="kl_cov", cov_fraction=0.25, kl_cov_coef=2.0, loss_agg="token_sum")
    loss, stats = policy_loss(logp, old, adv, mask, a)
    r = math.exp(0.1)
    plain = -r * 2 + r * 2  # -A·r summed over two A=+1 and two A=-1 tokens
    assert loss.item() == pytest.approx(plain + 2.0 * 0.1)
    assert stats["cov_selected_frac"] == 0.25


# --- advantages ---------------------------------------------------------------------------------
def test_batch_centred_std_divides_by_the_std_of_the_centred_advantages():
    r = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 0.0])  # groups of 3: means 2/3, 1/3
    a = Algorithm(scale="batch_centred_std", std_unbiased=False, std_eps=0.0)
    centred = torch.tensor([1 / 3, -2 / 3, 1 / 3, 2 / 3, -1 / 3, -1 / 3])
    std = math.sqrt(sum(c * c for c in centred.tolist()) / 6)  # their mean is 0
    torch.testing.assert_close(group_advantages(r, 3, a), centred / std)


def test_token_whiten_recentres_and_scales_over_tokens():
    r = torch.tensor([1.0, 0.0, 0.0, 0.0])
    lengths = torch.tensor([3, 1, 2, 2])
    a = Algorithm(scale="token_whiten", baseline="none")
    # tokens: three 1s and five 0s: mean 3/8, unbiased var (3·(5/8)² + 5·(3/8)²)/7
    mean, var = 3 / 8, (3 * (5 / 8) ** 2 + 5 * (3 / 8) ** 2) / 7
    expected = [(v - mean) / math.sqrt(var + 1e-8) for v in r.tolist()]
    got = group_advantages(r, 2, a, lengths=lengths)
    assert got.tolist() == pytest.approx(expected)
    assert (got * lengths).sum().item() == pytest.approx(0.0, abs=1e-6)  # token-weighted mean 0


def test_no_baseline_keeps_flat_groups_nonzero():
    r = torch.tensor([1.0, 1.0, 0.0, 1.0])
    got = group_advantages(r, 2, Algorithm(baseline="none", scale="none"))
    assert got.tolist() == [1.0, 1.0, 0.0, 1.0]
    assert group_advantages(r, 2, Algorithm(scale="none")).tolist() == [0.0, 0.0, -0.5, 0.5]


# --- aggregation --------------------------------------------------------------------------------
def test_prompt_mean_and_token_sum_hand_computed():
    loss = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    prompt_mean = AGGREGATIONS.get("prompt_mean")
    assert prompt_mean(loss, mask, None, torch.tensor([5, 5, 9])).item() == pytest.approx(7 / 3)
    assert prompt_mean(loss, mask, None, torch.tensor([0, 1, 2])).item() == pytest.approx(2.75)
    assert AGGREGATIONS.get("token_sum")(loss, mask, None, None).item() == 7.0
    with pytest.raises(ValueError, match="group ids"):
        prompt_mean(loss, mask, None, None)
