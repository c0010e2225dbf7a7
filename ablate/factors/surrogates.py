"""The policy surrogate: per-token losses [B, T] from log-ratios and advantages, one function per
`Algorithm.surrogate` value, all with one signature. Each returns the loss (before aggregation)
and its own diagnostics (detached scalars: what was clipped, gated or selected), and declares
the `Algorithm` fields it reads with the values it accepts (`reads=`): the algorithm's checks
and the peer tables derive from those declarations.

Shapes: B completions, T completion-token positions; `adv` is [B, 1] (one per completion) or
[B, T] (per token); `log_ratio` is log(π/π_old) as the ratio stage made it.
Formulas checked against verl 0.9.1 `core_algos.py` (compute_policy_loss_*), our own code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ablate.base.lazy import no_grad, torch
from ablate.base.masked import LOG_RATIO_LIMIT, masked_mean, masked_sum
from ablate.base.registry import AlgorithmFields, FieldRule, Registry, finite
from ablate.factors.trust_regions import RATIO_CAP, TRUST_REGIONS

if TYPE_CHECKING:
    from torch import Tensor

    # logp, log_ratio, adv, mask [B, T] (adv [B, 1] or [B, T]), algo -> (loss [B, T], diagnostics)
    SurrogateFn = Callable[[Tensor, Tensor, Tensor, Tensor, AlgorithmFields], tuple[Tensor, dict]]

SURROGATES: Registry[SurrogateFn] = Registry("surrogate")


def _at_least_zero(v: Any, algo: AlgorithmFields) -> bool:
    return finite(v) and v >= 0


def _above_zero(v: Any, algo: AlgorithmFields) -> bool:
    return finite(v) and v > 0


# --- the fields the surrogates read, with the values each accepts --------------------------------
# A bound of 0 (clip_low=1) is "no lower bound": MiniMax's for CISPO's stop-gradient weight, and
# the Clip-Cov authors' (their scripts set clip_ratio_low=high=1). Elsewhere a clip at ratio 0 is
# a mistake.
CLIP_LOW = FieldRule(
    "clip_low",
    lambda v, a: finite(v) and 0 <= v < 1,
    "must be a number in [0, 1) (the ratio is clipped at 1 - clip_low > 0)",
)
CLIP_LOW_OR_UNBOUNDED = FieldRule(
    "clip_low",
    lambda v, a: finite(v) and 0 <= v <= 1,
    "must be a number in [0, 1] (1 = no lower bound)",
)
CLIP_HIGH = FieldRule("clip_high", _at_least_zero, "must be a finite number >= 0")
DUAL_CLIP = FieldRule(
    "dual_clip",
    lambda v, a: v is None or (finite(v) and v > 1),
    "must be None (off) or a number > 1 (verl uses 3.0)",
)
SAPO_TAUS = tuple(
    FieldRule(name, _above_zero, "must be a number > 0 (SAPO uses 1.0 and 1.05)")
    for name in ("sapo_tau_pos", "sapo_tau_neg")
)
COV_FRACTION = FieldRule(
    "cov_fraction", lambda v, a: finite(v) and 0 < v <= 1, "must be in (0, 1] (verl uses 2e-4)"
)
COV_BOUNDS = (
    FieldRule(
        "cov_clip_low",
        lambda v, a: finite(v) and finite(a.cov_clip_high) and v < a.cov_clip_high,
        "must be a number below cov_clip_high={algo.cov_clip_high!r}",
    ),
    FieldRule("cov_clip_high"),  # its range is cov_clip_low's rule
)
KL_COV_COEF = FieldRule("kl_cov_coef", _at_least_zero, "must be a finite number >= 0")


def _ratio(log_ratio: Tensor) -> Tensor:
    return torch.exp(log_ratio.clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT))


def clipped_surrogate(log_ratio: Tensor, adv: Tensor, algo: AlgorithmFields) -> Tensor:
    """Per-token PPO loss [B, T] with decoupled clip bounds and optional dual clip."""
    ratio = _ratio(log_ratio)
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1.0 - algo.clip_low, 1.0 + algo.clip_high)
    loss = torch.maximum(unclipped, clipped)
    if algo.dual_clip is not None:
        loss = torch.where(adv < 0, torch.minimum(loss, -adv * algo.dual_clip), loss)
    return loss


@no_grad
def clip_fractions(log_ratio: Tensor, adv: Tensor, mask: Tensor, algo: AlgorithmFields) -> dict:
    """Shares of the masked tokens the clipped surrogate cuts: below 1 - clip_low with A < 0,
    above 1 + clip_high with A > 0, either, and above the dual clip with A < 0 (float32)."""
    m = mask > 0
    n_tok = mask.sum().clamp(min=1)
    eff = _ratio(log_ratio)  # the ratio the clip sees
    low = m & (adv < 0) & (eff < 1.0 - algo.clip_low)
    high = m & (adv > 0) & (eff > 1.0 + algo.clip_high)
    dual = m & (adv < 0) & (eff > algo.dual_clip) if algo.dual_clip else torch.zeros_like(m)
    return {
        "clip_frac_low": (low.sum() / n_tok).float(),
        "clip_frac_high": (high.sum() / n_tok).float(),
        "clip_frac": ((low | high).sum() / n_tok).float(),
        "dual_clip_frac": (dual.sum() / n_tok).float(),
    }


@TRUST_REGIONS.register("ratio_clip", reads=(CLIP_LOW, CLIP_HIGH, DUAL_CLIP))
def ratio_clip(logp: Tensor, log_ratio: Tensor, adv: Tensor, mask: Tensor, algo: AlgorithmFields):
    # PPO (Schulman et al. 2017, Eq. 7)
    return clipped_surrogate(log_ratio, adv, algo), clip_fractions(log_ratio, adv, mask, algo)


# The clip surrogate declares every field its trust regions read (so that another surrogate
# refuses them); `trust_region`'s own entries then refuse those the chosen region ignores.
TRUST_REGION = FieldRule("trust_region")


@SURROGATES.register("clip", reads=(CLIP_LOW, CLIP_HIGH, DUAL_CLIP, TRUST_REGION, RATIO_CAP))
def clip(logp: Tensor, log_ratio: Tensor, adv: Tensor, mask: Tensor, algo: AlgorithmFields):
    # the policy-gradient surrogate whose trust region is a field of its own (`trust_regions`)
    return TRUST_REGIONS.get(algo.trust_region)(logp, log_ratio, adv, mask, algo)


@SURROGATES.register("cispo", reads=(CLIP_LOW_OR_UNBOUNDED, CLIP_HIGH))
def cispo(logp: Tensor, log_ratio: Tensor, adv: Tensor, mask: Tensor, algo: AlgorithmFields):
    # MiniMax-M1 (arXiv 2506.13585) §3.1: sg(clip(r)) · A · log π — a clipped token keeps its
    # gradient through log π, scaled by the truncated weight.
    ratio = _ratio(log_ratio)
    weight = ratio.clamp(1.0 - algo.clip_low, 1.0 + algo.clip_high).detach()
    stats = {"is_weight_truncated_frac": masked_mean((weight != ratio).float(), mask)}
    return -weight * adv * logp, stats


@SURROGATES.register("sapo", reads=SAPO_TAUS)
def sapo(logp: Tensor, log_ratio: Tensor, adv: Tensor, mask: Tensor, algo: AlgorithmFields):
    # SAPO (arXiv 2511.20347): the hard clip becomes a gate f(r) = σ(τ(r - 1))·4/τ (slope 1 at
    # r = 1), with τ_pos for A > 0 and τ_neg otherwise.
    ratio = _ratio(log_ratio)
    pos, neg = (ratio.new_tensor(t) for t in (algo.sapo_tau_pos, algo.sapo_tau_neg))
    tau = torch.where(adv > 0, pos, neg)  # in the ratio's dtype: 1.05 is not a float32
    gate = torch.sigmoid(tau * (ratio - 1.0)) * (4.0 / tau)
    stats = {"sapo_gate_mean": masked_mean(gate.detach().expand_as(mask), mask)}
    return -gate * adv, stats


@SURROGATES.register("gmpo", reads=(CLIP_LOW, CLIP_HIGH))
def gmpo(logp: Tensor, log_ratio: Tensor, adv: Tensor, mask: Tensor, algo: AlgorithmFields):
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


@SURROGATES.register(
    "clip_cov", reads=(CLIP_LOW_OR_UNBOUNDED, CLIP_HIGH, COV_FRACTION, *COV_BOUNDS)
)
def clip_cov(logp: Tensor, log_ratio: Tensor, adv: Tensor, mask: Tensor, algo: AlgorithmFields):
    # Cui et al. 2025 (arXiv 2505.22617) Clip-Cov: among unclipped tokens whose covariance lies
    # in (cov_clip_low, cov_clip_high), a random cov_fraction of all tokens is detached (loss and
    # gradient 0). The draw uses torch's global generator, seeded per trial (seeding.py). Like
    # verl's, no dual clip: dual_clip is not read here, so it stays None (dual_clip_frac 0).
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
    stats = clip_fractions(log_ratio, adv, mask, algo)
    stats["cov_selected_frac"] = masked_mean((keep == 0).float(), mask)
    return loss * keep, stats


@SURROGATES.register("kl_cov", reads=(COV_FRACTION, KL_COV_COEF))
def kl_cov(logp: Tensor, log_ratio: Tensor, adv: Tensor, mask: Tensor, algo: AlgorithmFields):
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
