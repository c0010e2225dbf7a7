"""The policy surrogate: per-token losses [B, T] from log-ratios and advantages, one function per
`Algorithm.surrogate` value, all with one signature. Each returns the loss (before aggregation)
and its own diagnostics (detached scalars: what was clipped, gated or selected).

Shapes: B completions, T completion-token positions; `adv` is [B, 1] (one per completion) or
[B, T] (per token); `log_ratio` is log(π/π_old) as the ratio stage made it.
Formulas checked against verl 0.9.1 `core_algos.py` (compute_policy_loss_*), our own code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from ablate.masked import LOG_RATIO_LIMIT, masked_mean, masked_sum
from ablate.registry import Registry

if TYPE_CHECKING:
    from ablate.algorithms import Algorithm

# logp, log_ratio, adv, mask [B, T] (adv [B, 1] or [B, T]) -> (loss [B, T], diagnostics)
SurrogateFn = Callable[[Tensor, Tensor, Tensor, Tensor, "Algorithm"], tuple[Tensor, dict]]
SURROGATES: Registry[SurrogateFn] = Registry("surrogate")


def _ratio(log_ratio: Tensor) -> Tensor:
    return torch.exp(log_ratio.clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT))


def clipped_surrogate(log_ratio: Tensor, adv: Tensor, algo: Algorithm) -> Tensor:
    """Per-token PPO loss [B, T] with decoupled clip bounds and optional dual clip."""
    ratio = _ratio(log_ratio)
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1.0 - algo.clip_low, 1.0 + algo.clip_high)
    loss = torch.maximum(unclipped, clipped)
    if algo.dual_clip is not None:
        loss = torch.where(adv < 0, torch.minimum(loss, -adv * algo.dual_clip), loss)
    return loss


@SURROGATES.register("clip")
def clip(logp: Tensor, log_ratio: Tensor, adv: Tensor, mask: Tensor, algo: Algorithm):
    # PPO (Schulman et al. 2017, Eq. 7); its clip fractions are in objective.loss_stats.
    return clipped_surrogate(log_ratio, adv, algo), {}


@SURROGATES.register("cispo")
def cispo(logp: Tensor, log_ratio: Tensor, adv: Tensor, mask: Tensor, algo: Algorithm):
    # MiniMax-M1 (arXiv 2506.13585) §3.1: sg(clip(r)) · A · log π — a clipped token keeps its
    # gradient through log π, scaled by the truncated weight.
    ratio = _ratio(log_ratio)
    weight = ratio.clamp(1.0 - algo.clip_low, 1.0 + algo.clip_high).detach()
    stats = {"is_weight_truncated_frac": masked_mean((weight != ratio).float(), mask)}
    return -weight * adv * logp, stats


@SURROGATES.register("sapo")
def sapo(logp: Tensor, log_ratio: Tensor, adv: Tensor, mask: Tensor, algo: Algorithm):
    # SAPO (arXiv 2511.20347): the hard clip becomes a gate f(r) = σ(τ(r - 1))·4/τ (slope 1 at
    # r = 1), with τ_pos for A > 0 and τ_neg otherwise.
    ratio = _ratio(log_ratio)
    pos, neg = (ratio.new_tensor(t) for t in (algo.sapo_tau_pos, algo.sapo_tau_neg))
    tau = torch.where(adv > 0, pos, neg)  # in the ratio's dtype: 1.05 is not a float32
    gate = torch.sigmoid(tau * (ratio - 1.0)) * (4.0 / tau)
    stats = {"sapo_gate_mean": masked_mean(gate.detach().expand_as(mask), mask)}
    return -gate * adv, stats


@SURROGATES.register("gmpo")
def gmpo(logp: Tensor, log_ratio: Tensor, adv: Tensor, mask: Tensor, algo: Algorithm):
    # GMPO (arXiv 2507.20673): per sequence, the geometric mean of the token ratios, each
    # clipped in log space to [-clip_low, clip_high] on the side the advantage's sign makes
    # pessimistic. One loss per sequence, broadcast over its tokens: a sequence-mean
    # aggregation then gives the paper's mean over sequences.
    adv_tok = adv.expand_as(log_ratio)
    sign = torch.sign(adv_tok)
    bounded = log_ratio.clamp(-algo.clip_low, algo.clip_high)
    pessimistic = sign * torch.minimum(sign * log_ratio, sign * bounded)
    count = mask.sum(-1) + 1e-8  # verl's guard for an empty row, kept for parity
    seq_ratio = torch.exp(masked_sum(pessimistic, mask, -1) / count)  # [B]
    seq_adv = masked_sum(adv_tok, mask, -1) / count  # [B]
    loss = (-seq_adv * seq_ratio).unsqueeze(-1).expand_as(log_ratio)
    clipped = (log_ratio != bounded).float()
    stats = {
        "gmpo_clip_frac_high": masked_mean(clipped * (adv_tok > 0), mask),
        "gmpo_clip_frac_low": masked_mean(clipped * (adv_tok < 0), mask),
    }
    return loss, stats


def _covariance(adv_tok: Tensor, logp: Tensor, mask: Tensor) -> Tensor:
    """Per-token covariance term (A - mean A)(log π - mean log π) over the masked tokens."""
    a = adv_tok - masked_mean(adv_tok, mask)
    lp = logp.detach()
    return a * (lp - masked_mean(lp, mask))


@SURROGATES.register("clip_cov")
def clip_cov(logp: Tensor, log_ratio: Tensor, adv: Tensor, mask: Tensor, algo: Algorithm):
    # Cui et al. 2025 (arXiv 2505.22617) Clip-Cov: among unclipped tokens whose covariance lies
    # in (cov_clip_low, cov_clip_high), a random cov_fraction of all tokens is detached (loss and
    # gradient 0). The draw uses torch's global generator, seeded per trial (seeding.py).
    unclipped = -adv * _ratio(log_ratio)
    loss = clipped_surrogate(log_ratio, adv, algo)
    clipped_by_ppo = (loss > unclipped) & (mask > 0)
    cov = _covariance(adv.expand_as(logp), logp, mask)
    eligible = (cov > algo.cov_clip_low) & (cov < algo.cov_clip_high) & (mask > 0)
    eligible &= ~clipped_by_ppo
    candidates = torch.nonzero(eligible)  # [k, 2]
    count = max(int(algo.cov_fraction * float(mask.sum())), 1)
    keep = torch.ones_like(loss)
    if len(candidates):
        chosen = candidates[torch.randperm(len(candidates))[:count]]
        keep[chosen[:, 0], chosen[:, 1]] = 0.0
    stats = {"cov_selected_frac": masked_mean((keep == 0).float(), mask)}
    return loss * keep, stats


@SURROGATES.register("kl_cov")
def kl_cov(logp: Tensor, log_ratio: Tensor, adv: Tensor, mask: Tensor, algo: Algorithm):
    # Cui et al. 2025 (arXiv 2505.22617) KL-Cov: no clip; the top cov_fraction of tokens by
    # covariance get kl_cov_coef · |log r| added to the policy-gradient loss.
    ratio = _ratio(log_ratio)
    adv_tok = adv.expand_as(logp)
    loss = -adv_tok * ratio
    valid = mask > 0
    n_valid = int(valid.sum())
    penalty = torch.zeros_like(loss)
    if n_valid:
        a, lp = adv_tok[valid].detach(), logp[valid].detach()
        cov = (a - a.mean()) * (lp - lp.mean())  # [n_valid], covariance over valid tokens only
        top = torch.topk(cov, max(1, int(n_valid * algo.cov_fraction))).indices
        flat = torch.zeros(n_valid, dtype=loss.dtype)
        flat[top] = 1.0
        penalty[valid] = flat.to(loss.device)
    loss = loss + penalty * algo.kl_cov_coef * log_ratio.abs()
    return loss, {"cov_selected_frac": masked_mean(penalty, mask)}
