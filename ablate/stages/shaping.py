"""The step's data-side factors, from a verified batch to what the estimator and the update read:
the soft overlong punishment, the KL penalty in the reward, the truncation mask and the
rollout-correction weights. `shape` applies them in that order; every factor is a pure tensor
function. (Dynamic sampling's group filter samples again to refill, so it lives with sampling in
`batch`.)
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ablate.base.records import ScoredBatch, ShapedBatch
from ablate.base.registry import Registry
from ablate.factors.algorithms import Algorithm
from ablate.factors.objective import KL_ESTIMATORS, masked_mean, masked_sum

#: exp() of a log-ratio beyond ±20 overflows float32 products; the cap binds long before.
LOG_LIMIT = 20.0


def shape(
    batch: ScoredBatch,
    old_logp: Tensor,
    ref_logp: Tensor | None,
    algo: Algorithm,
    max_new_tokens: int,
) -> ShapedBatch:
    """Apply the data-side factors of `algo` to a verified batch; `ref_logp` is given when a
    reference model is loaded (kl_coef > 0)."""
    r = batch.rollouts
    outcome, metrics = floor_rewards(batch.scores, algo.reward_floor), {}
    if algo.overlong_buffer:
        penalty = soft_overlong_penalty(
            r.lengths, max_new_tokens, algo.overlong_buffer, algo.overlong_penalty
        )
        outcome = outcome + penalty
        metrics["reward/overlong_penalty_mean"] = penalty.mean().item()
    rewards, kl_penalty = outcome, None
    if ref_logp is not None and algo.kl_in == "reward":
        kl_tok = KL_ESTIMATORS.get(algo.kl_estimator)(old_logp, ref_logp)  # [B, T]
        kl = masked_sum(kl_tok, r.completion_mask, -1)  # [B]
        rewards = rewards - algo.kl_coef * kl
        metrics["reward/kl_penalty_mean"] = (algo.kl_coef * kl).mean().item()
        kl_penalty = algo.kl_coef * kl_tok
    loss_mask = r.completion_mask
    if algo.mask_truncated:
        loss_mask = mask_truncated(loss_mask, r.truncated)
    metrics["reward/shaped_mean"] = rewards.mean().item()
    correct = ROLLOUT_CORRECTIONS.get(algo.rollout_correction)
    is_weights = correct(old_logp, r.logprobs, r.completion_mask, algo.rollout_correction_cap)
    if is_weights is not None:
        metrics.update(rollout_correction_metrics(old_logp, r.logprobs, is_weights, loss_mask))
    return ShapedBatch(
        rollouts=r,
        outcome=outcome,
        kl_penalty=kl_penalty,
        rewards=rewards,
        loss_mask=loss_mask,
        old_logp=old_logp,
        ref_logp=ref_logp if algo.kl_in == "loss" else None,
        is_weights=is_weights,
        metrics=metrics,
    )


def floor_rewards(scores: Tensor, floor: float) -> Tensor:
    """Rewards in [0, 1] mapped linearly onto [floor, 1]: a wrong answer's 0 becomes `floor`
    (-1: the ±1 rewards of DAPO §3.1 and of W-REINFORCE's REINFORCE), a correct 1 stays 1."""
    if floor == 0:
        return scores.clone()
    return floor + (1.0 - floor) * scores


def mask_truncated(mask: Tensor, truncated: Tensor) -> Tensor:
    """Overlong filtering: zero the loss mask [B, T] of truncated completions (bool [B])."""
    return mask * (~truncated.bool()).to(mask.dtype).unsqueeze(-1)


def soft_overlong_penalty(lengths: Tensor, max_len: int, buffer: int, penalty: float) -> Tensor:
    """DAPO Eq. 13, scaled by `penalty`: 0 up to max_len - buffer, then linear down to -penalty
    at max_len, and -penalty beyond. lengths [B] → reward adjustment [B] (float)."""
    if buffer <= 0:
        return torch.zeros(lengths.shape, dtype=torch.float32)
    if buffer > max_len:
        raise ValueError(f"overlong buffer {buffer} exceeds the max length {max_len}")
    expected = max_len - buffer
    excess = (lengths.float() - expected).clamp(min=0.0)
    return -penalty * (excess / buffer).clamp(max=1.0)


# --- off-policy correction: the engine samples, the trainer's old policy is what the ratio uses.
# trainer log-probs, engine log-probs, mask [B, T], cap -> weights [B, T] (detached) or None
CorrectionFn = Callable[[Tensor, Tensor, Tensor, float], "Tensor | None"]
ROLLOUT_CORRECTIONS: Registry[CorrectionFn] = Registry("rollout correction")


@ROLLOUT_CORRECTIONS.register("none")
def no_correction(old_logp: Tensor, engine_logp: Tensor, mask: Tensor, cap: float) -> None:
    return None


@ROLLOUT_CORRECTIONS.register("token_truncate")
def token_truncate(old_logp: Tensor, engine_logp: Tensor, mask: Tensor, cap: float) -> Tensor:
    # Truncated importance sampling (Yao et al. 2025, "Your efficient RL framework secretly
    # brings you off-policy RL"; TRL token_truncate, verl rollout_is="token"): min(π_old/π_engine,
    # cap) per token. Identical log-probs give weight 1 exactly.
    diff = ((old_logp - engine_logp) * mask).clamp(-LOG_LIMIT, LOG_LIMIT)
    return torch.exp(diff).clamp(max=cap) * mask


@ROLLOUT_CORRECTIONS.register("sequence_mask")
def sequence_mask(old_logp: Tensor, engine_logp: Tensor, mask: Tensor, cap: float) -> Tensor:
    # TRL's sequence_mask: the sequence's ratio Π π_old/π_engine weights all its tokens, and a
    # sequence whose ratio exceeds the cap is dropped (weight 0) rather than truncated.
    seq = masked_sum(old_logp - engine_logp, mask, -1).clamp(-LOG_LIMIT, LOG_LIMIT)  # [B]
    ratio = torch.exp(seq)
    ratio = torch.where(ratio > cap, torch.zeros_like(ratio), ratio)
    return ratio.unsqueeze(-1) * mask


def rollout_correction_metrics(
    old_logp: Tensor, engine_logp: Tensor, weights: Tensor, loss_mask: Tensor
) -> dict[str, float]:
    mask = loss_mask
    rows = mask.sum(-1) > 0
    dropped = (weights.sum(-1) == 0) & rows
    return {
        "offpolicy/is_weight_mean": masked_mean(weights, mask).item(),
        "offpolicy/log_ratio_abs_mean": masked_mean((old_logp - engine_logp).abs(), mask).item(),
        "offpolicy/dropped_seq_frac": (dropped.sum() / rows.sum().clamp(min=1)).item(),
    }
