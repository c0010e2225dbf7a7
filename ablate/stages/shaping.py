"""The step's data-side factors, from a verified batch to what the estimator and the update read:
the soft overlong punishment, the KL penalty in the reward and the truncation mask. `shape`
applies them in that order; every factor is a pure tensor function. (Dynamic sampling's group
filter samples again to refill, so it lives with sampling in `batch`; the rollout correction
reads the advantages, so it runs after the estimator, in `offpolicy`.)
"""

from __future__ import annotations

import torch
from torch import Tensor

from ablate.base.records import ScoredBatch, ShapedBatch
from ablate.factors.algorithms import Algorithm
from ablate.factors.objective import KL_ESTIMATORS, masked_sum
from ablate.factors.rollout_corrections import ROLLOUT_CORRECTIONS as ROLLOUT_CORRECTIONS


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
    return ShapedBatch(
        rollouts=r,
        outcome=outcome,
        kl_penalty=kl_penalty,
        rewards=rewards,
        loss_mask=loss_mask,
        old_logp=old_logp,
        ref_logp=ref_logp if algo.kl_in == "loss" else None,
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
