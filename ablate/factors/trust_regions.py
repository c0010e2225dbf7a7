"""The trust region of the clipped surrogate (`Algorithm.trust_region`): what keeps an update near
the policy that sampled it. One function per value, with the surrogates' signature (per-token
losses [B, T] and their diagnostics from logp, log-ratio, advantages and mask).

"ratio_clip" (registered by `surrogates`, which owns it) is PPO's clip of the probability ratio
(Schulman et al. 2017, Eq. 7). "dppo_tv" and "dppo_kl" are DPPO's binary divergence masks (Qi
et al. 2026, "Rethinking the Trust Region in LLM Reinforcement Learning", arXiv 2602.04879): a
token's gradient is dropped when its own probability moved out of the trust region in the
direction its advantage pushes, measured as the total variation π − π_old or as the KL between
the Bernoulli distributions (π_old, 1 − π_old) and (π, 1 − π), not as the ratio π / π_old, which
swings widely for rare tokens. The kept tokens are weighted by the detached ratio, capped at
`ratio_cap` (truncated importance sampling, §5.4), so a kept token's gradient is the unclipped
PPO one: −A · sg(min(r, cap)) · ∇log π.

Formulas checked against verl `core_algos.py` (`compute_policy_loss_dppo_tv`, `…_dppo_kl`, at
verl-project/verl 1dda039, 2026-08-22), our own code: `clip_low` / `clip_high` are the divergence
thresholds for negative / positive advantages (verl's clip_ratio_low / clip_ratio_high), and the
loss value is verl's −A · sg(w) · log π (its gradient is the surrogate's, its value is not a
ratio).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ablate.base.lazy import no_grad, torch
from ablate.base.masked import LOG_RATIO_LIMIT, masked_mean
from ablate.base.registry import AlgorithmFields, FieldRule, Registry, finite

if TYPE_CHECKING:
    from torch import Tensor

    # logp, log_ratio, adv, mask [B, T] (adv [B, 1] or [B, T]), algo -> (loss [B, T], diagnostics)
    TrustRegionFn = Callable[[Tensor, Tensor, Tensor, Tensor, AlgorithmFields], tuple[Tensor, dict]]

TRUST_REGIONS: Registry[TrustRegionFn] = Registry("trust region")

#: Bernoulli KL's guard against log(0) at π = 1, as verl's.
BINARY_KL_EPS = 1e-8


def _threshold_ok(v: Any, algo: AlgorithmFields) -> bool:
    return finite(v) and v > 0


DIVERGENCE_BOUNDS = tuple(
    FieldRule(
        name,
        _threshold_ok,
        f"must be a number > 0 (with a DPPO trust region, the {side} divergence threshold; "
        "verl's DPPO script: 0.15 for TV, 0.05 for KL)",
    )
    for name, side in (("clip_low", "negative-advantage"), ("clip_high", "positive-advantage"))
)
RATIO_CAP = FieldRule(
    "ratio_cap",
    lambda v, a: v is None or (finite(v) and v >= 1),
    "must be None (no cap) or a number >= 1 (verl's DPPO script: 10000)",
)


def _ratio(log_ratio: Tensor) -> Tensor:
    return torch.exp(log_ratio.clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT))


def _masked_ratio_loss(
    logp: Tensor, log_ratio: Tensor, adv: Tensor, mask: Tensor, valid: Tensor, algo
) -> tuple[Tensor, dict]:
    """DPPO's per-token loss −A · sg(min(r, cap)) · log π on the tokens inside the region."""
    ratio = _ratio(log_ratio)
    weight = ratio if algo.ratio_cap is None else ratio.clamp(max=algo.ratio_cap)
    keep = valid.detach().to(logp.dtype)
    loss = -adv * weight.detach() * logp * keep
    return loss, _stats(ratio, keep, mask, algo)


@no_grad
def _stats(ratio: Tensor, keep: Tensor, mask: Tensor, algo) -> dict:
    capped = (ratio > algo.ratio_cap) if algo.ratio_cap is not None else torch.zeros_like(keep)
    return {
        "trust_region_masked_frac": masked_mean(1.0 - keep, mask).float(),
        "ratio_capped_frac": masked_mean(capped.to(keep.dtype) * keep, mask).float(),
    }


def _old_logp(logp: Tensor, log_ratio: Tensor) -> Tensor:
    # the token log-ratio is logp − old_logp exactly; the old log-prob is a constant
    return (logp - log_ratio).detach()


@TRUST_REGIONS.register("dppo_tv", reads=(*DIVERGENCE_BOUNDS, RATIO_CAP))
def dppo_tv(logp: Tensor, log_ratio: Tensor, adv: Tensor, mask: Tensor, algo: AlgorithmFields):
    # DPPO-Binary-TV: a token with A > 0 stays while π − π_old <= clip_high, one with A <= 0
    # while π − π_old >= −clip_low.
    change = torch.exp(logp.detach()) - torch.exp(_old_logp(logp, log_ratio))
    valid = torch.where(adv > 0, change <= algo.clip_high, change >= -algo.clip_low)
    return _masked_ratio_loss(logp, log_ratio, adv, mask, valid, algo)


def binary_kl(logp: Tensor, old_logp: Tensor) -> Tensor:
    """KL(Bernoulli(π_old) || Bernoulli(π)) per token, from the two log-probabilities."""
    p, p_old = torch.exp(logp), torch.exp(old_logp)
    rest = torch.log((1.0 - p_old + BINARY_KL_EPS) / (1.0 - p + BINARY_KL_EPS))
    return p_old * (old_logp - logp) + (1.0 - p_old) * rest


@TRUST_REGIONS.register("dppo_kl", reads=(*DIVERGENCE_BOUNDS, RATIO_CAP))
def dppo_kl(logp: Tensor, log_ratio: Tensor, adv: Tensor, mask: Tensor, algo: AlgorithmFields):
    # DPPO-Binary-KL: a token leaves the region only when its binary KL exceeds the threshold AND
    # its probability moved the way its advantage pushes (up for A > 0, down for A <= 0).
    old = _old_logp(logp, log_ratio)
    new = logp.detach()
    kl = binary_kl(new, old)
    up_ok = (kl <= algo.clip_high) | (new <= old)
    down_ok = (kl <= algo.clip_low) | (new >= old)
    valid = torch.where(adv > 0, up_ok, down_ok)
    return _masked_ratio_loss(logp, log_ratio, adv, mask, valid, algo)
