"""The off-policy stage of a step: the rollout correction applied to a shaped batch once its
advantages exist (OPSM reads their sign), and the mismatch diagnostics.

It runs after the estimator, so a rejection (geo_rs, k3_rs, m2po) shrinks the loss mask the
updates, the KL/entropy terms and every aggregation see, but not the mask GAE whitened its
advantages over (verl rejects before its advantages; the group estimator reads no mask).
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

from ablate.base.masked import LOG_RATIO_LIMIT, masked_mean
from ablate.base.records import ShapedBatch
from ablate.factors.algorithms import Algorithm
from ablate.factors.rollout_corrections import ROLLOUT_CORRECTIONS, Correction

#: A token's engine and trainer log-probs "differ" beyond this: above the fp32 noise of the same
#: weights in two batch layouts (under 1e-5 here), below a bf16 copy's typical gap (~1e-3).
MISMATCH_TOL = 1e-4


def correct(
    batch: ShapedBatch, advantages: Tensor, algo: Algorithm, *, staleness: int = 0
) -> ShapedBatch:
    """`batch` with `algo.rollout_correction` applied (weights on the policy loss, rejected
    tokens out of the loss mask) and, when a correction or a mismatch is active, the
    `offpolicy/` diagnostics in its metrics. No correction and no mismatch: `batch` itself."""
    r = batch.rollouts
    mismatch = staleness > 0 or not r.logprobs_exact
    if algo.rollout_correction == "none" and not mismatch:
        return batch
    fn = ROLLOUT_CORRECTIONS.get(algo.rollout_correction)
    c = fn(batch.old_logp, r.logprobs, r.completion_mask, advantages, algo)
    loss_mask = batch.loss_mask if c.keep is None else batch.loss_mask * c.keep
    metrics = {
        **batch.metrics,
        **mismatch_metrics(batch.old_logp, r.logprobs, batch.loss_mask),
        **correction_metrics(
            c, batch.old_logp, r.logprobs, batch.loss_mask, algo.rollout_correction_cap
        ),
        "offpolicy/staleness": float(staleness),
    }
    weights = None if c.weights is None else c.weights.detach()
    return dataclasses.replace(batch, loss_mask=loss_mask, is_weights=weights, metrics=metrics)


@torch.no_grad()
def mismatch_metrics(trainer_logp: Tensor, engine_logp: Tensor, mask: Tensor) -> dict[str, float]:
    """How far the engine's log-probs are from the trainer's over the masked tokens: |Δ log p|
    mean and max, Pearson correlation of the probabilities (verl PR #7196), and k3 of
    KL(π_engine ‖ π_trainer) (verl's rollout_corr/k3_kl); and the share of tokens whose log-probs
    differ by more than `MISMATCH_TOL` (`mismatched_frac`: what the inert-factor check reads for
    a mismatch factor)."""
    m = mask > 0
    if not bool(m.any()):
        return {}
    diff = (trainer_logp - engine_logp)[m].double()  # [N]
    lr = diff.clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)
    p_t, p_e = trainer_logp[m].double().exp(), engine_logp[m].double().exp()
    return {
        "offpolicy/logp_diff_mean": diff.abs().mean().item(),
        "offpolicy/logp_diff_max": diff.abs().max().item(),
        "offpolicy/prob_pearson": pearson(p_t, p_e),
        "offpolicy/k3_kl": (torch.exp(lr) - 1.0 - lr).mean().item(),
        "offpolicy/mismatched_frac": (diff.abs() > MISMATCH_TOL).double().mean().item(),
    }


def pearson(x: Tensor, y: Tensor) -> float:
    """Pearson correlation of two [N] tensors; 1 when they are equal (also when constant)."""
    if torch.equal(x, y):
        return 1.0
    xc, yc = x - x.mean(), y - y.mean()
    denom = (xc.square().sum() * yc.square().sum()).sqrt()
    return float((xc * yc).sum() / denom) if denom > 0 else 0.0


@torch.no_grad()
def correction_metrics(
    c: Correction, trainer_logp: Tensor, engine_logp: Tensor, mask: Tensor, cap: float
) -> dict[str, float]:
    """What the correction did to the masked tokens: the share whose effective weight it moved
    off 1 (`changed_frac`: what the inert-factor check reads), the share it weighted out or
    rejected (`masked_frac`, per token and per sequence), the share truncation bound
    (`clipped_frac`: ρ above the cap, weight = cap), and the weights' mean and effective sample
    size (`effective_sample_size`)."""
    m = mask > 0
    rows = m.any(-1)
    if not bool(m.any()):
        return {}
    weights = c.weights if c.weights is not None else mask.to(torch.float32)
    keep = c.keep if c.keep is not None else torch.ones_like(mask)
    w = (weights * keep).double()  # [B, T] the effective weight of each token's loss
    off = (w == 0) & m
    rho = torch.exp((trainer_logp - engine_logp).clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT))
    clipped = (rho > cap) & (weights == cap) & m
    w_mean = masked_mean(w, mask.double())
    ess = effective_sample_size(w[m])
    return {
        "offpolicy/changed_frac": (w != 1)[m].double().mean().item(),
        "offpolicy/masked_frac": off[m].double().mean().item(),
        "offpolicy/masked_seq_frac": (off.any(-1) & rows).double().sum().item() / rows.sum().item(),
        "offpolicy/clipped_frac": clipped[m].double().mean().item(),
        "offpolicy/is_weight_mean": w_mean.item(),
        "offpolicy/ess": ess,
    }


def effective_sample_size(w: Tensor) -> float:
    """(Σw)² / (N Σw²) of the weights [N]: 1 when uniform, 1/N when one token carries them all,
    0 when every weight is 0 (nothing is learned from the batch). It is verl's
    rollout_is_eff_sample_size, 1 / mean((w / mean w)²), where that is defined."""
    total_sq = float((w * w).sum())
    return float(w.sum()) ** 2 / (len(w) * total_sq) if total_sq > 0 else 0.0
