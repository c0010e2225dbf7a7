"""Group-relative advantages as small pure functions on tensors: a baseline and a scale over each
group of G completions of one prompt (n groups, B = n·G). Each value of `Algorithm.baseline` and
`Algorithm.scale` is one function in its registry, declaring the fields it reads (`reads=`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ablate.base.errors import ConfigError
from ablate.base.lazy import torch
from ablate.base.registry import AlgorithmFields, FieldRule, Registry, finite

if TYPE_CHECKING:
    from torch import Tensor

    BaselineFn = Callable[[Tensor], Tensor]  # rewards [n, G] -> baseline [n, G]
    # centred, rewards, completion lengths [n, G] -> scaled [n, G]
    ScaleFn = Callable[[Tensor, Tensor, "Tensor | None", AlgorithmFields], Tensor]

BASELINES: Registry[BaselineFn] = Registry("baseline")
SCALES: Registry[ScaleFn] = Registry("advantage scale")


def _divide_or_zero(x: Tensor, d: Tensor) -> Tensor:
    ok = d > 0
    return torch.where(ok, x / torch.where(ok, d, torch.ones_like(d)), torch.zeros_like(x))


# A group whose rewards are all equal gets a baseline equal to its rewards, so its centred
# rewards are exactly 0 (no rounding noise for a scale to divide by a tiny std).
def _flat_is_exact(rewards: Tensor, baseline: Tensor) -> Tensor:
    flat = (rewards == rewards[:, :1]).all(dim=1, keepdim=True)  # [n, 1]
    return torch.where(flat, rewards, baseline)


@BASELINES.register("group_mean")
def group_mean_baseline(rewards: Tensor) -> Tensor:
    return _flat_is_exact(rewards, rewards.mean(dim=1, keepdim=True).expand_as(rewards))


@BASELINES.register("leave_one_out")
def leave_one_out_baseline(rewards: Tensor) -> Tensor:
    g = rewards.shape[1]
    if g < 2:
        raise ConfigError("baseline='leave_one_out' needs a group size of at least 2")
    return _flat_is_exact(rewards, (rewards.sum(dim=1, keepdim=True) - rewards) / (g - 1))


@BASELINES.register("none")
def no_baseline(rewards: Tensor) -> Tensor:
    # REINFORCE++ (arXiv 2501.03262): no per-prompt baseline; scale="token_whiten" then centres
    # over the batch.
    return torch.zeros_like(rewards)


# The std scales read these two fields; token_whiten (verl's fixed form) and none read neither.
STD_READS = (
    FieldRule("std_unbiased", lambda v, a: isinstance(v, bool), "must be True or False"),
    FieldRule("std_eps", lambda v, a: finite(v) and v >= 0, "must be a finite number >= 0"),
)


@SCALES.register("group_std", reads=STD_READS)
def group_std_scale(
    centred: Tensor, rewards: Tensor, lengths: Tensor | None, algo: AlgorithmFields
):
    correction = 1 if algo.std_unbiased and rewards.shape[1] > 1 else 0
    std = rewards.std(dim=1, keepdim=True, correction=correction)
    return _divide_or_zero(centred, std + algo.std_eps)


@SCALES.register("batch_std", reads=STD_READS)
def batch_std_scale(
    centred: Tensor, rewards: Tensor, lengths: Tensor | None, algo: AlgorithmFields
):
    # Lite-PPO / TRL scale_rewards="batch": group mean, but the std of all rewards in the batch.
    correction = 1 if algo.std_unbiased and rewards.numel() > 1 else 0
    std = rewards.reshape(-1).std(correction=correction)
    return _divide_or_zero(centred, std + algo.std_eps)


@SCALES.register("batch_centred_std", reads=STD_READS)
def batch_centred_std_scale(centred: Tensor, rewards: Tensor, lengths: Tensor | None, algo):
    # ScaleRL (arXiv 2510.13786) batch-level advantage normalisation: the std of the
    # group-centred advantages over the whole batch, one value per completion.
    correction = 1 if algo.std_unbiased and centred.numel() > 1 else 0
    std = centred.reshape(-1).std(correction=correction)
    return _divide_or_zero(centred, std + algo.std_eps)


@SCALES.register("token_whiten")
def token_whiten_scale(centred: Tensor, rewards: Tensor, lengths: Tensor | None, algo):
    # verl's REINFORCE++ (masked_whiten): each completion's value repeated over its tokens, then
    # re-centred on the token mean and divided by sqrt(unbiased token variance + 1e-8), so long
    # completions weigh more in both. std_eps and std_unbiased are not read (verl's fixed form).
    if lengths is None:
        raise ValueError("scale='token_whiten' needs the completions' lengths")
    w = lengths.to(centred.dtype)
    n = w.sum()
    if n < 2:
        raise ConfigError("scale='token_whiten' needs at least 2 completion tokens in a batch")
    mean = (centred * w).sum() / n
    var = ((centred - mean) ** 2 * w).sum() / n * (n / (n - 1))
    return (centred - mean) * torch.rsqrt(var + 1e-8)


@SCALES.register("mean", reads=STD_READS[1:])
def mean_scale(centred: Tensor, rewards: Tensor, lengths: Tensor | None, algo: AlgorithmFields):
    # MaxRL (Tajwar et al. 2026, "Maximum Likelihood Reinforcement Learning", arXiv 2602.02710):
    # (r - baseline) / (group mean reward + eps). With 0/1 rewards the mean is the pass rate p,
    # and 1/p reweights the gradient toward maximum likelihood. A group with mean <= 0 (all
    # wrong, or a shaped reward below 0) gets 0: 1/p has no meaning there, and a negative mean
    # would flip the advantage's sign.
    mean = rewards.mean(dim=1, keepdim=True)
    return torch.where(mean > 0, _divide_or_zero(centred, mean + algo.std_eps), 0.0 * centred)


@SCALES.register("none")
def no_scale(centred: Tensor, rewards: Tensor, lengths: Tensor | None, algo: AlgorithmFields):
    return centred


POSITIVE_WEIGHT = FieldRule(
    "positive_weight",
    lambda v, a: finite(v) and v >= 0,
    "must be a finite number >= 0 (1 = unweighted; W-REINFORCE uses 0.1)",
)

#: The fields the group-relative advantage estimator reads (the other estimators ignore them).
GROUP_READS = ("baseline", "scale", *SCALES.fields_read(), POSITIVE_WEIGHT)


def weight_positives(advantages: Tensor, weight: float) -> Tensor:
    """Advantage-sign weighting: each positive advantage times `weight` (Zhu et al. 2025, "The
    Surprising Effectiveness of Negative Reinforcement in LLM Reasoning", arXiv 2506.01347:
    W-REINFORCE is λ·L_PSR + L_NSR, λ = 0.1; their code scales the advantages of correct
    samples by λ). 1 returns the advantages untouched."""
    if weight == 1:
        return advantages
    return torch.where(advantages > 0, advantages * weight, advantages)


def group_advantages(
    rewards: Tensor, group_size: int, algo: AlgorithmFields, *, lengths: Tensor | None = None
) -> Tensor:
    """Group-relative advantages [B] from rewards [B] in contiguous groups of `group_size`;
    `lengths` [B] (completion tokens) are read by token-weighted scales.

    A group whose rewards are all equal gets exactly 0 under a group baseline.
    """
    if rewards.ndim != 1:
        raise ValueError(f"rewards must be 1-D [B], got shape {tuple(rewards.shape)}")
    if group_size < 1 or rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not split into groups of {group_size}")
    r = rewards if rewards.is_floating_point() else rewards.float()
    grouped = r.reshape(-1, group_size)  # [n, G]
    centred = grouped - BASELINES.get(algo.baseline)(grouped)
    lens = None if lengths is None else lengths.reshape(-1, group_size)
    scaled = SCALES.get(algo.scale)(centred, grouped, lens, algo).reshape(-1)
    return weight_positives(scaled, algo.positive_weight)
