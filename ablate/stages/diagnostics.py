"""What to watch during RL training (reward and its group variance, lengths by correctness,
truncation, entropy, advantages) as small functions: batch tensors in, named floats out.

Names are namespaced (`reward/`, `policy/`, `length/`, `entropy/`, `budget/`, `eval/`, `perf/`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from ablate.base.records import ScoredBatch


def reward_metrics(rewards: Tensor, correct: Tensor, group_size: int) -> dict[str, float]:
    """Signal quality of one rollout batch (rewards [B] float, correct [B] bool)."""
    r = rewards.double().reshape(-1, group_size)
    c = correct.bool().reshape(-1, group_size)
    flat = (r == r[:, :1]).all(dim=1)
    return {
        "reward/mean": r.mean().item(),
        "reward/group_var_mean": r.var(dim=1, correction=0).mean().item(),
        "reward/frac_groups_any_correct": c.any(dim=1).double().mean().item(),
        "reward/frac_groups_zero_var": flat.double().mean().item(),
        "reward/pass_at_G": c.any(dim=1).double().mean().item(),
        "reward/pass_hat_G": c.all(dim=1).double().mean().item(),
        "reward/accuracy": c.double().mean().item(),
    }


def identical_fraction(texts: Sequence[str], group_size: int) -> float:
    """Share of completions that repeat an earlier completion of their own group."""
    if not texts:
        return 0.0
    repeats = 0
    for start in range(0, len(texts), group_size):
        group = texts[start : start + group_size]
        repeats += len(group) - len(set(group))
    return repeats / len(texts)


def _mean(xs: Tensor) -> float:
    return xs.double().mean().item() if xs.numel() else math.nan


def length_metrics(lengths: Tensor, correct: Tensor, truncated: Tensor) -> dict[str, float]:
    """Completion length overall and conditioned on correctness; truncation rate.
    A metric with no samples (e.g. no correct answer) is NaN, never a misleading 0."""
    lengths = lengths.double()
    correct = correct.bool()
    return {
        "length/mean": _mean(lengths),
        "length/median": lengths.median().item() if lengths.numel() else math.nan,
        "length/max": lengths.max().item() if lengths.numel() else math.nan,
        "length/correct_mean": _mean(lengths[correct]),
        "length/incorrect_mean": _mean(lengths[~correct]),
        "length/truncation_rate": _mean(truncated.double()),
    }


def advantage_metrics(advantages: Tensor, mask: Tensor | None = None) -> dict[str, float]:
    """Advantages [B], or per token [B, T] (GAE) over the tokens where `mask` is 1."""
    a = advantages.double()
    if mask is not None and a.ndim == 2:
        a = a[mask.bool()]
    return {
        "policy/adv_mean": _mean(a),
        "policy/adv_abs_mean": _mean(a.abs()),
        "policy/adv_max": a.max().item() if a.numel() else math.nan,
    }


def entropy_metrics(entropy: Tensor | None, mask: Tensor) -> dict[str, float]:
    """Mean per-token entropy of the temperature-scaled sampling distribution; nothing where the
    engine reports none (vLLM), so no NaN reaches `entropy/mean` or the statistics over it."""
    if entropy is None:
        return {}
    m = mask.double()
    return {"entropy/mean": ((entropy.double() * m).sum() / m.sum().clamp(min=1)).item()}


def self_check_rate(flags: Sequence[bool | None], correct: Tensor) -> dict[str, float]:
    """Frequency of the task's self-check overall and within correct / incorrect completions;
    empty where the task defines no self-check."""
    if not flags or all(f is None for f in flags):
        return {}
    f = torch.tensor([bool(x) for x in flags], dtype=torch.float64)
    c = correct.bool()
    return {
        "length/self_check_rate": _mean(f),
        "length/self_check_rate_correct": _mean(f[c]),
        "length/self_check_rate_incorrect": _mean(f[~c]),
    }


def mean_stats(stats: Sequence[dict[str, float]], prefix: str = "policy/") -> dict[str, float]:
    """Average the per-update loss statistics of one RL step; maxima stay maxima, times (`perf/`)
    add up. Keys already namespaced (`critic/…`, `perf/…`) keep their name."""
    if not stats:
        return {}
    out = {}
    for key in stats[0]:
        values = [s[key] for s in stats if key in s]
        reduce = max if key.endswith("_max") else (min if key.endswith("_min") else None)
        if key.startswith("perf/"):
            reduce = sum
        mean = sum(values) / len(values)
        out[key if "/" in key else prefix + key] = reduce(values) if reduce else mean
    return out


def sample_metrics(batch: ScoredBatch, group_size: int, suffix: str = "") -> dict[str, float]:
    """Reward, length, self-check and entropy metrics of the samples of `batch`, each key with
    `suffix` appended (the trainer logs the step's every sample plainly, so arms compare, and
    dynamic sampling's trained batch again as `_kept`)."""
    r = batch.rollouts
    metrics = {
        **reward_metrics(batch.scores, batch.correct, group_size),
        **length_metrics(r.lengths, batch.correct, r.truncated),
        **self_check_rate([v.self_check for v in batch.verdicts], batch.correct),
        **entropy_metrics(r.entropy, r.completion_mask),
        "reward/identical_frac": identical_fraction(r.texts, group_size),
    }
    return {key + suffix: value for key, value in metrics.items()}
