"""Off-policy corrections for the train–inference mismatch: the engine samples from π_engine
(another precision, or a policy k updates old), the trainer's old policy π_old is what the PPO
ratio uses. Each correction is one pure function of (trainer log-probs, engine log-probs, mask
[B, T], advantages [B] or [B, T], algorithm) returning a `Correction`:

- `weights` [B, T] (detached) multiply each token's policy loss (0 = weighted out; the
  aggregation's denominators keep the token), as TRL's `importance_sampling_ratio`, verl's
  `rollout_is_weights` and DeepSeek-V3.2's OPSM mask do;
- `keep` [B, T] (1/0) removes rejected tokens from the loss mask itself (KL, entropy and every
  aggregation's denominators lose them), as verl's rejection sampling (`rollout_rs`, it rewrites
  `response_mask`) and AReaL's M2PO (it rewrites `loss_mask`) do.

All are decoupled-mode corrections (verl's three policies): evaluated once per rollout batch
from the trainer's log-probs before the updates and the engine's; with one update per rollout
those equal π_θ at the update, which is what TRL's OPSM reads. With identical log-probs every
weight is exactly 1 and nothing is masked. ρ = π_old / π_engine per token throughout.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ablate.base.lazy import torch
from ablate.base.masked import LOG_RATIO_LIMIT, masked_mean, masked_sum
from ablate.base.registry import AlgorithmFields, FieldRule, Registry, finite

if TYPE_CHECKING:
    from torch import Tensor


@dataclass(frozen=True)
class Correction:
    """What a correction does to the loss: token weights and/or a rejection of tokens."""

    weights: Tensor | None = None  # [B, T] detached, 0 on padding
    keep: Tensor | None = None  # [B, T] 1 = trained, 0 = rejected from the loss mask


# trainer log-probs, engine log-probs, mask [B, T], advantages [B] or [B, T], algo -> Correction
CorrectionFn = Callable[["Tensor", "Tensor", "Tensor", "Tensor", AlgorithmFields], Correction]
ROLLOUT_CORRECTIONS: Registry[CorrectionFn] = Registry("rollout correction")


def _cap_at_least_one(v: Any, algo: AlgorithmFields) -> bool:
    return finite(v) and v >= 1


def _band_upper(v: Any, algo: AlgorithmFields) -> bool:
    return finite(v) and v > 1


def _band_lower(v: Any, algo: AlgorithmFields) -> bool:
    # above 1 the band would reject ρ = 1: a correction must be a no-op without mismatch
    return v is None or (finite(v) and 0 < v <= 1)


def _positive(v: Any, algo: AlgorithmFields) -> bool:
    return finite(v) and v > 0


def _non_negative(v: Any, algo: AlgorithmFields) -> bool:
    return finite(v) and v >= 0


CAP = FieldRule("rollout_correction_cap", _cap_at_least_one, "must be a number >= 1 (TRL 3.0)")
BAND_UPPER = FieldRule(
    "rollout_correction_cap",
    _band_upper,
    "must be a number > 1 (β <= 1 leaves no band around ratio 1; IcePop β = 5)",
)
BAND_LOWER = FieldRule(
    "rollout_correction_floor", _band_lower, "must be None (1/cap) or a number in (0, 1]"
)
K3_MAX = FieldRule("rejection_k3_max", _positive, "must be a number > 0 (verl 0.01)")
OPSM_DELTA = FieldRule("opsm_delta", _non_negative, "must be a number >= 0 (TRL example 0.5)")
M2_MAX = FieldRule("m2po_threshold", _positive, "must be a number > 0 (M2PO 0.04)")


def log_ratio(trainer_logp: Tensor, engine_logp: Tensor, mask: Tensor) -> Tensor:
    """log ρ [B, T] = log π_old − log π_engine, 0 on padding, clamped at ±20 (verl's bound)."""
    return ((trainer_logp - engine_logp) * mask).clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)


def lower_bound(algo: AlgorithmFields) -> float:
    """The band's lower ratio bound: `rollout_correction_floor`, or 1/cap when None."""
    floor = algo.rollout_correction_floor
    return 1.0 / algo.rollout_correction_cap if floor is None else floor


@ROLLOUT_CORRECTIONS.register("none")
def no_correction(trainer_logp, engine_logp, mask, advantages, algo) -> Correction:
    return Correction()


@ROLLOUT_CORRECTIONS.register("token_truncate", reads=(CAP,))
def token_truncate(trainer_logp, engine_logp, mask, advantages, algo) -> Correction:
    # Token TIS (Yao et al. 2025, "Your efficient RL framework secretly brings you off-policy
    # RL training", §2 truncated IS; verl rollout_is="token", TRL token_truncate): min(ρ, C).
    rho = torch.exp(log_ratio(trainer_logp, engine_logp, mask))  # [B, T]
    return Correction(weights=rho.clamp(max=algo.rollout_correction_cap) * mask)


@ROLLOUT_CORRECTIONS.register("token_mis", reads=(BAND_UPPER, BAND_LOWER))
def token_mis(trainer_logp, engine_logp, mask, advantages, algo) -> Correction:
    # Token MIS / IcePop (Ling team, "IcePop", 2025 §3: discrepancy masking; TRL PR #4732
    # token_mask, verl rollout_is="token" with threshold "lower_upper"): ρ inside
    # [floor, cap], 0 outside; floor defaults to 1/cap (open-instruct's [1/β, β]).
    rho = torch.exp(log_ratio(trainer_logp, engine_logp, mask)) * mask  # [B, T]
    inside = (rho >= lower_bound(algo)) & (rho <= algo.rollout_correction_cap)
    return Correction(weights=torch.where(inside, rho, torch.zeros_like(rho)))


@ROLLOUT_CORRECTIONS.register("sequence_mask", reads=(CAP,))
def sequence_mask(trainer_logp, engine_logp, mask, advantages, algo) -> Correction:
    # Sequence MIS (TRL sequence_mask; Liu, Li et al. 2025, "When speed kills stability", §4
    # Seq-MIS): the sequence's ratio Π ρ weights all its tokens; above the cap it is 0.
    seq = masked_sum(trainer_logp - engine_logp, mask, -1).clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)
    ratio = torch.exp(seq)  # [B]
    ratio = torch.where(ratio > algo.rollout_correction_cap, torch.zeros_like(ratio), ratio)
    return Correction(weights=ratio.unsqueeze(-1) * mask)


@ROLLOUT_CORRECTIONS.register("geo_rs", reads=(BAND_UPPER, BAND_LOWER))
def geo_rs(trainer_logp, engine_logp, mask, advantages, algo) -> Correction:
    # Geometric-mean rejection (Liu, Li et al. 2025 §4 Geo-RS; verl rollout_rs="seq_mean_k1",
    # NeMo-RL seq-mask-tis's mask): reject a sequence whose exp(mean_t log ρ) leaves
    # [floor, cap]. verl bounds the reciprocal, exp(mean_t −log ρ): its "l_u" is our [1/u, 1/l].
    mean_log = masked_mean(log_ratio(trainer_logp, engine_logp, mask), mask, -1)  # [B]
    lower, upper = math.log(lower_bound(algo)), math.log(algo.rollout_correction_cap)
    kept = (mean_log >= lower) & (mean_log <= upper)
    return Correction(keep=kept.unsqueeze(-1).to(mask.dtype).expand_as(mask))


@ROLLOUT_CORRECTIONS.register("k3_rs", reads=(K3_MAX,))
def k3_rs(trainer_logp, engine_logp, mask, advantages, algo) -> Correction:
    # K3 rejection (verl rollout_rs="seq_mean_k3", preset bypass_ppo_clip_k3_rs; Schulman's k3
    # estimator of KL(π_engine || π_old)): reject a sequence whose mean per-token
    # ρ − 1 − log ρ exceeds `rejection_k3_max`.
    lr = log_ratio(trainer_logp, engine_logp, mask)
    k3 = torch.exp(lr) - 1.0 - lr  # [B, T] (verl's form; 0 exactly where ρ = 1)
    kept = masked_mean(k3, mask, -1) <= algo.rejection_k3_max  # [B]
    return Correction(keep=kept.unsqueeze(-1).to(mask.dtype).expand_as(mask))


@ROLLOUT_CORRECTIONS.register("opsm", reads=(OPSM_DELTA,))
def opsm(trainer_logp, engine_logp, mask, advantages, algo) -> Correction:
    # Off-policy sequence masking (DeepSeek-AI 2025, DeepSeek-V3.2 §3.1 Eq. 9; TRL
    # off_policy_mask_threshold, slime --use-opsm): a sequence with a negative advantage whose
    # mean per-token log(π_engine/π_θ) exceeds δ gets weight 0. Advantages [B] or [B, T]
    # (GAE: the sequence's first token's sign, as it is constant for the group estimator).
    kl = masked_mean(engine_logp - trainer_logp, mask, -1)  # [B]
    adv = advantages if advantages.ndim == 1 else advantages[:, 0]
    kept = (adv >= 0) | (kl <= algo.opsm_delta)
    return Correction(weights=kept.unsqueeze(-1).to(mask.dtype) * mask)


@ROLLOUT_CORRECTIONS.register("m2po", reads=(M2_MAX,))
def m2po(trainer_logp, engine_logp, mask, advantages, algo) -> Correction:
    # M2PO (Zheng et al. 2025, "Prosperity before collapse", arXiv 2510.01161, §4: second-moment
    # trust region; AReaL actor.m2_threshold): over the batch's tokens, reject those with the
    # largest (log ρ)² until the mean (log ρ)² of the rest is below τ (at least one kept).
    m2 = log_ratio(trainer_logp, engine_logp, mask) ** 2  # [B, T]
    live = mask.reshape(-1) > 0
    values = m2.reshape(-1)[live]  # [N]
    order = torch.sort(values, descending=True, stable=True).indices
    ranked = values[order]
    suffix_mean = ranked.flip(0).cumsum(0).flip(0) / torch.arange(
        len(ranked), 0, -1, dtype=ranked.dtype
    )
    below = torch.nonzero(suffix_mean < algo.m2po_threshold)
    n_reject = int(below[0]) if len(below) else max(len(ranked) - 1, 0)
    kept_ranked = torch.arange(len(ranked)) >= n_reject
    kept = torch.zeros_like(values, dtype=torch.bool)
    kept[order] = kept_ranked
    keep = torch.zeros_like(live)
    keep[live] = kept
    return Correction(keep=keep.reshape(mask.shape).to(mask.dtype))
