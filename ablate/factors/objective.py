"""The GRPO-family policy loss as small pure functions on tensors (the group-relative advantages
it is weighted by are `ablate.factors.advantages`).

Shapes: B completions, T completion-token positions.
`mask` is 1 on a completion's real tokens and 0 on padding. The loss is composed in stages:
ratio → surrogate → KL / entropy per token → aggregation. Each factor value is one function in
a registry; every function of a registry has the same signature and declares the `Algorithm`
fields it reads (`reads=`), from which the algorithm's checks and the peer tables derive.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ablate.base.errors import ConfigError
from ablate.base.lazy import no_grad, torch
from ablate.base.masked import LOG_RATIO_LIMIT, masked_mean, masked_sum
from ablate.base.registry import AlgorithmFields, FieldRule, Registry
from ablate.factors.advantages import BASELINES, SCALES
from ablate.factors.reward_controls import REWARD_CONTROLS
from ablate.factors.rollout_corrections import ROLLOUT_CORRECTIONS
from ablate.factors.surrogates import SURROGATES, clipped_surrogate
from ablate.factors.trust_regions import TRUST_REGIONS

__all__ = [
    "AGGREGATIONS",
    "FACTORS",
    "KL_ESTIMATORS",
    "LOG_RATIO_LIMIT",
    "RATIOS",
    "SURROGATES",
    "TRUST_REGIONS",
    "clipped_surrogate",
    "masked_mean",
    "masked_sum",
    "policy_loss",
]


if TYPE_CHECKING:
    from torch import Tensor

    RatioFn = Callable[
        [Tensor, Tensor, Tensor], Tensor
    ]  # logp, old_logp, mask [B, T] -> log r [B, T]
    # loss, mask [B, T], L, group ids [B] -> scalar
    AggFn = Callable[[Tensor, Tensor, "int | None", "Tensor | None"], Tensor]
    KLFn = Callable[[Tensor, Tensor], Tensor]  # logp, ref_logp [B, T] -> kl [B, T]

RATIOS: Registry[RatioFn] = Registry("ratio level")
AGGREGATIONS: Registry[AggFn] = Registry("loss aggregation")
KL_ESTIMATORS: Registry[KLFn] = Registry("KL estimator")


# --- importance ratios ------------------------------------------------------------------------
def sequence_log_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    """GSPO's length-normalised log-ratio per sequence [B]: mean over tokens of log(pi/pi_old)."""
    return masked_mean(logp - old_logp, mask, dim=-1)


@RATIOS.register("token")
def token_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    return logp - old_logp


@RATIOS.register("sequence")
def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    return sequence_log_ratio(logp, old_logp, mask).unsqueeze(-1).expand_as(logp)


@RATIOS.register("sequence_token")
def sequence_token_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    # GSPO-token: value sg[s_i]; gradient through each token's own log-prob.
    seq = sequence_log_ratio(logp, old_logp, mask).detach().unsqueeze(-1)
    return seq + logp - logp.detach()


# --- KL estimators (samples from pi_theta; log r = log pi_ref - log pi_theta) ------------------
@KL_ESTIMATORS.register("k1")
def kl_k1(logp: Tensor, ref_logp: Tensor) -> Tensor:
    return logp - ref_logp


@KL_ESTIMATORS.register("k2")
def kl_k2(logp: Tensor, ref_logp: Tensor) -> Tensor:
    return 0.5 * (ref_logp - logp) ** 2


@KL_ESTIMATORS.register("k3")
def kl_k3(logp: Tensor, ref_logp: Tensor) -> Tensor:
    log_r = (ref_logp - logp).clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)
    return _k3(log_r)


def _k3(log_r: Tensor) -> Tensor:
    # expm1 keeps precision for tiny log-ratios; the clamp removes the last ulp of rounding so
    # the estimator is >= 0 as it is in exact arithmetic.
    return (torch.expm1(log_r) - log_r).clamp(min=0.0)


# --- aggregation ------------------------------------------------------------------------------
# A fully masked row is no sample of the loss: every sequence-mean mode divides by the number of
# rows with at least one token, as token_mean divides by the number of tokens.
def _rows(mask: Tensor) -> Tensor:
    return (mask.sum(-1) > 0).sum().clamp(min=1)


@AGGREGATIONS.register("token_mean")
def token_mean(loss: Tensor, mask: Tensor, norm_constant: int | None, group_ids=None):
    return masked_sum(loss, mask) / mask.sum().clamp(min=1)


@AGGREGATIONS.register("seq_mean_token_mean")
def seq_mean_token_mean(
    loss: Tensor, mask: Tensor, norm_constant: int | None, group_ids=None
) -> Tensor:
    return masked_mean(loss, mask, dim=-1).sum() / _rows(mask)


@AGGREGATIONS.register("seq_mean_token_sum")
def seq_mean_token_sum(
    loss: Tensor, mask: Tensor, norm_constant: int | None, group_ids=None
) -> Tensor:
    return masked_sum(loss, mask, dim=-1).sum() / _rows(mask)


def _norm_constant_ok(v: Any, algo: AlgorithmFields) -> bool:
    return v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 1)


NORM_CONSTANT = FieldRule(
    "loss_norm_constant", _norm_constant_ok, "must be a positive integer or None (max new tokens)"
)


@AGGREGATIONS.register("seq_mean_token_sum_norm", reads=(NORM_CONSTANT,))
def seq_mean_token_sum_norm(
    loss: Tensor, mask: Tensor, norm_constant: int | None, group_ids=None
) -> Tensor:
    if norm_constant is None:
        raise ConfigError(
            "loss_agg='seq_mean_token_sum_norm' needs loss_norm_constant; "
            "call algo.resolve(max_new_tokens=...) first"
        )
    return seq_mean_token_sum(loss, mask, None) / norm_constant


@AGGREGATIONS.register("prompt_mean")
def prompt_mean(loss: Tensor, mask: Tensor, norm_constant: int | None, group_ids=None):
    # ScaleRL (arXiv 2510.13786) "prompt average": the token mean within each prompt's group,
    # then the mean over prompts with at least one token. group_ids [B] name each row's prompt.
    if group_ids is None:
        raise ValueError("loss_agg='prompt_mean' needs the rows' group ids")
    _, group = torch.unique(group_ids.to(loss.device), return_inverse=True)  # [B] in 0..n-1
    n = int(group.max()) + 1 if group.numel() else 0
    sums = loss.new_zeros(n).index_add(0, group, masked_sum(loss, mask, -1))
    counts = loss.new_zeros(n).index_add(0, group, mask.sum(-1).to(loss.dtype))
    present = counts > 0
    return (sums[present] / counts[present]).sum() / present.sum().clamp(min=1)


@AGGREGATIONS.register("token_sum")
def token_sum(loss: Tensor, mask: Tensor, norm_constant: int | None, group_ids=None):
    # verl's "token-sum" (PR 7197): the plain sum over tokens; the gradient's scale then grows
    # with the batch's token count.
    return masked_sum(loss, mask)


#: Each factor's registry by the `Algorithm` field that chooses its entry (the checks read the
#: fields each entry declares from here).
FACTORS: dict[str, Registry] = {
    "baseline": BASELINES,
    "scale": SCALES,
    "ratio_level": RATIOS,
    "surrogate": SURROGATES,
    "trust_region": TRUST_REGIONS,  # after the surrogate: only the clip surrogate reads it
    "kl_estimator": KL_ESTIMATORS,
    "loss_agg": AGGREGATIONS,
    "reward_control": REWARD_CONTROLS,  # the data side's: which reward the step trains on
    "rollout_correction": ROLLOUT_CORRECTIONS,  # the engine-vs-trainer mismatch's correction
}


# --- the composed loss ------------------------------------------------------------------------
def policy_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    algo: AlgorithmFields,
    *,
    ref_logp: Tensor | None = None,
    entropy: Tensor | None = None,
    is_weights: Tensor | None = None,
    group_ids: Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """Scalar loss to minimise and its diagnostics. logp, old_logp, mask, ref_logp, entropy,
    is_weights (rollout-correction weights, detached): [B, T]; advantages: [B] (one per
    completion, broadcast over its tokens) or [B, T] (per token, GAE); group_ids [B] (the
    prompt of each row, for loss_agg="prompt_mean"). The KL term (kl_in="loss") and entropy bonus
    are added per token before aggregation, so they share the policy loss's normaliser."""
    _check_shapes(logp, old_logp, advantages, mask, ref_logp, entropy)
    mask = mask.to(logp.dtype)
    adv = advantages.to(logp.dtype)
    adv = adv if adv.ndim == 2 else adv.unsqueeze(-1)  # [B, T] or [B, 1]
    log_ratio = RATIOS.get(algo.ratio_level)(logp, old_logp, mask)  # [B, T]
    pg_tok, surrogate_stats = SURROGATES.get(algo.surrogate)(logp, log_ratio, adv, mask, algo)
    if is_weights is not None:
        pg_tok = pg_tok * is_weights.to(pg_tok.dtype)
    loss_tok = pg_tok
    kl_tok = None
    if ref_logp is not None:
        kl_tok = KL_ESTIMATORS.get(algo.kl_estimator)(logp, ref_logp)
    if algo.kl_coef > 0 and algo.kl_in == "loss":
        if kl_tok is None:
            raise ValueError("kl_coef > 0 with kl_in='loss' needs ref_logp")
        loss_tok = loss_tok + algo.kl_coef * kl_tok
    if entropy is not None and algo.entropy_coef > 0:
        loss_tok = loss_tok - algo.entropy_coef * entropy
    aggregate = AGGREGATIONS.get(algo.loss_agg)
    loss = aggregate(loss_tok, mask, algo.loss_norm_constant, group_ids)
    stats = loss_stats(logp, old_logp, mask, kl_tok, entropy)
    stats.update({k: float(v) for k, v in surrogate_stats.items()})
    stats["pg_loss"] = float(aggregate(pg_tok.detach(), mask, algo.loss_norm_constant, group_ids))
    stats["loss"] = float(loss.detach())
    return loss, stats


def _check_shapes(logp, old_logp, advantages, mask, ref_logp, entropy) -> None:
    if logp.ndim != 2:
        raise ValueError(f"logp must be [B, T], got {tuple(logp.shape)}")
    for name, t in (
        ("old_logp", old_logp),
        ("mask", mask),
        ("ref_logp", ref_logp),
        ("entropy", entropy),
    ):
        if t is not None and t.shape != logp.shape:
            raise ValueError(f"{name} shape {tuple(t.shape)} != logp shape {tuple(logp.shape)}")
    if advantages.shape not in (logp.shape[:1], logp.shape):
        raise ValueError(
            f"advantages must be [B] or [B, T]={tuple(logp.shape)}, got {tuple(advantages.shape)}"
        )


@no_grad
def loss_stats(
    logp: Tensor,
    old_logp: Tensor,
    mask: Tensor,
    kl_tok: Tensor | None,
    entropy: Tensor | None,
) -> dict[str, float]:
    """Ratio statistics, KLs and entropy over the masked tokens, as floats (what a surrogate
    clipped, gated or selected is in its own diagnostics)."""
    m = mask > 0
    tok_log = (logp - old_logp).clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)
    r = torch.exp(tok_log)
    r_mean = masked_mean(r, mask)
    rows = mask.sum(-1) > 0
    seq_r = torch.exp(sequence_log_ratio(logp, old_logp, mask))[rows]
    seq_mean = seq_r.mean() if seq_r.numel() else r_mean.new_tensor(1.0)
    seq_var = seq_r.var(correction=0) if seq_r.numel() else r_mean.new_tensor(0.0)
    any_tok = bool(m.any())
    one = r_mean.new_tensor(1.0)
    values = {
        "ratio_mean": r_mean if any_tok else one,
        "ratio_max": r[m].max() if any_tok else one,
        "ratio_min": r[m].min() if any_tok else one,
        "ratio_var": masked_mean((r - r_mean) ** 2, mask),
        "seq_ratio_mean": seq_mean,
        "seq_ratio_var": seq_var,
        "kl_old": masked_mean(_k3(tok_log), mask),  # k3 of KL(old || new)
    }
    if kl_tok is not None:
        values["kl_ref"] = masked_mean(kl_tok, mask)
    if entropy is not None:
        values["entropy"] = masked_mean(entropy, mask)
    keys = list(values)
    floats = torch.stack([values[k].float().reshape(()) for k in keys]).tolist()
    return dict(zip(keys, floats, strict=True))
