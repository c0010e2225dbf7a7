"""The checks of an `Algorithm`: value sets, ranges, fields that the chosen estimator or
surrogate would ignore (refused: an ablation must never claim a factor it did not change), and
warnings for combinations that are legal but inert. Standard library only, like `algorithms`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import fields
from typing import Any, get_args, get_type_hints

from ablate.algorithms import (
    _SHARE,
    DAPO_BUFFER_SHARE,
    TOKEN_SUMMING_AGGS,
    Algorithm,
    Surrogate,
)
from ablate.errors import AblateWarning


def problems(algo: Algorithm) -> list[str]:
    """Every problem of `algo`, each with its fix (all at once, not the first)."""
    return _literal_problems(algo) + _range_problems(algo) + _cross_field_problems(algo)


def _literal_problems(algo: Algorithm) -> list[str]:
    hints = get_type_hints(Algorithm)
    problems = []
    for f in fields(algo):
        allowed = get_args(hints[f.name])
        if allowed and all(isinstance(a, str) for a in allowed):
            value = getattr(algo, f.name)
            if value not in allowed:
                valid = ", ".join(repr(a) for a in allowed)
                problems.append(f"{f.name}={value!r} is not one of {valid}")
    return problems


def _finite(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _range_problems(a: Algorithm) -> list[str]:
    p = []
    nonnegative = ("std_eps", "clip_low", "clip_high", "kl_coef", "entropy_coef")
    for name in (*nonnegative, "overlong_penalty", "kl_cov_coef"):
        v = getattr(a, name)
        if not _finite(v) or v < 0:
            p.append(f"{name}={v!r} must be a finite number >= 0")
    # A bound of 0 (clip_low=1) is "no lower bound": MiniMax's for CISPO's stop-gradient weight,
    # and the Clip-Cov authors' (their scripts set clip_ratio_low=high=1). Elsewhere a PPO clip
    # at ratio 0 is a mistake.
    low_max = 1.0 if a.surrogate in ("cispo", "clip_cov") else 1.0 - 1e-12
    if _finite(a.clip_low) and a.clip_low > low_max:
        p.append(f"clip_low={a.clip_low} must be < 1 (the ratio is clipped at 1 - clip_low > 0)")
    if a.dual_clip is not None and (not _finite(a.dual_clip) or a.dual_clip <= 1):
        p.append(f"dual_clip={a.dual_clip!r} must be None (off) or a number > 1 (verl uses 3.0)")
    for name in ("max_gen_batches", "ppo_epochs", "minibatches"):
        v = getattr(a, name)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            p.append(f"{name}={v!r} must be an integer >= 1")
    p += _overlong_buffer_problems(a.overlong_buffer)
    c = a.loss_norm_constant
    if c is not None and (not isinstance(c, int) or isinstance(c, bool) or c < 1):
        p.append(f"loss_norm_constant={c!r} must be a positive integer or None (max new tokens)")
    p += _critic_range_problems(a) + _surrogate_range_problems(a) + _data_range_problems(a)
    bools = ("std_unbiased", "dynamic_sampling", "mask_truncated", "whiten_advantages")
    for name in (*bools, "zero_variance_filter"):
        if not isinstance(getattr(a, name), bool):
            p.append(f"{name}={getattr(a, name)!r} must be True or False")
    return p


def _surrogate_range_problems(a: Algorithm) -> list[str]:
    p = []
    for name in ("sapo_tau_pos", "sapo_tau_neg"):
        v = getattr(a, name)
        if not _finite(v) or v <= 0:
            p.append(f"{name}={v!r} must be a number > 0 (SAPO uses 1.0 and 1.05)")
    if not _finite(a.cov_fraction) or not 0 < a.cov_fraction <= 1:
        p.append(f"cov_fraction={a.cov_fraction!r} must be in (0, 1] (verl uses 2e-4)")
    lo, hi = a.cov_clip_low, a.cov_clip_high
    if not (_finite(lo) and _finite(hi) and lo < hi):
        p.append(f"cov_clip_low={lo!r} must be a number below cov_clip_high={hi!r}")
    return p


def _data_range_problems(a: Algorithm) -> list[str]:
    p = []
    r = a.retire_pass_rate
    if r is not None and (not _finite(r) or not 0 < r <= 1):
        p.append(f"retire_pass_rate={r!r} must be None (off) or in (0, 1] (ScaleRL uses 0.9)")
    q = a.random_reward
    if q is not None and (not _finite(q) or not 0 <= q <= 1):
        p.append(f"random_reward={q!r} must be None (the verifier) or a probability in [0, 1]")
    c = a.rollout_correction_cap
    if not _finite(c) or c < 1:
        p.append(f"rollout_correction_cap={c!r} must be a number >= 1 (TRL uses 3.0)")
    return p


def _overlong_buffer_problems(b: Any) -> list[str]:
    if isinstance(b, str):
        share = _SHARE.fullmatch(b)
        if share is None or not 0 < float(share.group(1)) < 100:
            return [f"overlong_buffer={b!r} must be tokens or a share in (0%, 100%), e.g. '20%'"]
        return []
    if b is None:  # its meaning before the value said what it is
        return [
            f"overlong_buffer=None is written overlong_buffer={DAPO_BUFFER_SHARE!r} (DAPO's share)"
        ]
    if not isinstance(b, int) or isinstance(b, bool) or b < 0:
        return [f"overlong_buffer={b!r} must be an integer >= 0 (0 = off) or a share such as '20%'"]
    return []


def _critic_range_problems(a: Algorithm) -> list[str]:
    p = []
    for name in ("gae_gamma", "gae_lambda"):
        v = getattr(a, name)
        if not _finite(v) or not 0 <= v <= 1:
            p.append(f"{name}={v!r} must be a number in [0, 1]")
    if not _finite(a.vf_coef) or a.vf_coef <= 0:
        p.append(f"vf_coef={a.vf_coef!r} must be a number > 0 (0 would never train the critic)")
    if a.vf_clip is not None and (not _finite(a.vf_clip) or a.vf_clip <= 0):
        p.append(f"vf_clip={a.vf_clip!r} must be None (off) or a number > 0 (TRL uses 0.2)")
    if a.critic_lr is not None and (not _finite(a.critic_lr) or a.critic_lr <= 0):
        p.append(f"critic_lr={a.critic_lr!r} must be None (the policy's lr) or a number > 0")
    return p


# Fields that mean something for one advantage estimator only. dynamic_sampling is not among
# the group-only ones: it is a data filter, and a critic still gets a signal from the groups it
# keeps (the comparison "PPO + dynamic sampling" is a legitimate arm).
GROUP_ONLY_FIELDS = ("baseline", "scale", "std_unbiased", "std_eps")
GAE_ONLY_FIELDS = (
    "gae_gamma",
    "gae_lambda",
    "vf_coef",
    "vf_clip",
    "whiten_advantages",
    "critic_lr",
)


def _estimator_problems(a: Algorithm) -> list[str]:
    """A field set away from its default for the estimator that ignores it is a silent no-op:
    refuse it, so an ablation never claims a factor it did not change."""
    defaults = {f.name: f.default for f in fields(Algorithm)}
    if a.advantage == "gae":
        irrelevant, why = GROUP_ONLY_FIELDS, "the learned value is GAE's baseline"
        fix = "remove it, or use advantage='group'"
    else:
        irrelevant, why = GAE_ONLY_FIELDS, "there is no critic"
        fix = "remove it, or use advantage='gae'"
    return [
        f"{name}={getattr(a, name)!r} does nothing with advantage={a.advantage!r} ({why}); {fix}"
        for name in irrelevant
        if getattr(a, name) != defaults[name]
    ]


# Fields that one surrogate reads; set away from their defaults with another, they are refused.
SURROGATE_FIELDS = {
    "sapo_tau_pos": ("sapo",),
    "sapo_tau_neg": ("sapo",),
    "cov_fraction": ("clip_cov", "kl_cov"),
    "cov_clip_low": ("clip_cov",),
    "cov_clip_high": ("clip_cov",),
    "kl_cov_coef": ("kl_cov",),
    "clip_low": ("clip", "cispo", "gmpo", "clip_cov"),
    "clip_high": ("clip", "cispo", "gmpo", "clip_cov"),
    "dual_clip": ("clip",),
}


def _surrogate_problems(a: Algorithm) -> list[str]:
    defaults = {f.name: f.default for f in fields(Algorithm)}
    p = [
        f"{name}={getattr(a, name)!r} does nothing with surrogate={a.surrogate!r} (it is read by "
        f"{', '.join(users)}); remove it"
        for name, users in SURROGATE_FIELDS.items()
        if a.surrogate not in users and getattr(a, name) != defaults[name]
    ]
    if a.surrogate != "clip" and a.ratio_level != "token":
        p.append(
            f"ratio_level={a.ratio_level!r} is GSPO's ratio for the clipped surrogate; "
            f"surrogate={a.surrogate!r} takes token ratios (gmpo forms its own sequence ratio)"
        )
    return p


def _cross_field_problems(a: Algorithm) -> list[str]:
    p = _estimator_problems(a) if a.advantage in ("group", "gae") else []
    if a.surrogate in get_args(Surrogate):
        p += _surrogate_problems(a)
    if a.zero_variance_filter and a.dynamic_sampling:
        p.append(
            "zero_variance_filter=True with dynamic_sampling=True: dynamic sampling already drops "
            "flat groups (and refills); choose one"
        )
    if a.loss_norm_constant is not None and a.loss_agg != "seq_mean_token_sum_norm":
        p.append(
            f"loss_norm_constant={a.loss_norm_constant} only applies to "
            f"loss_agg='seq_mean_token_sum_norm' (got {a.loss_agg!r}); set it to None"
        )
    if a.overlong_buffer != 0 and _finite(a.overlong_penalty) and a.overlong_penalty == 0:
        p.append("overlong_buffer is on but overlong_penalty=0 makes it a no-op; set one of them")
    return p


def _warn(message: str) -> None:
    """An `AblateWarning` attributed to the first caller outside ablate and `dataclasses` (the
    user's line that built the algorithm), not to `dataclasses.replace`."""
    import sys
    from pathlib import Path

    package = str(Path(__file__).parent)
    level, frame = 1, sys._getframe(1)
    while frame is not None and (
        frame.f_code.co_filename.startswith(package)
        or Path(frame.f_code.co_filename).name == "dataclasses.py"
        or (frame.f_code.co_filename, frame.f_code.co_name) == ("<string>", "__init__")
    ):  # the last one: a dataclass's generated __init__
        level, frame = level + 1, frame.f_back
    warnings.warn(message, AblateWarning, stacklevel=level + 1)


def warn_about_inert_factors(a: Algorithm) -> None:
    if a.surrogate == "gmpo" and a.loss_agg != "seq_mean_token_mean":
        _warn(
            f"surrogate='gmpo' with loss_agg={a.loss_agg!r}: GMPO's loss is one number per "
            "sequence, averaged over sequences (loss_agg='seq_mean_token_mean'); other modes "
            "weight sequences by their length",
        )
    if a.ratio_level != "token" and a.loss_agg in TOKEN_SUMMING_AGGS:
        _warn(
            f"ratio_level={a.ratio_level!r} with loss_agg={a.loss_agg!r}: each sequence's loss is "
            "counted once per token, so sequences are weighted by their length (trl#3823). GSPO's "
            "objective is loss_agg='seq_mean_token_mean'.",
        )
    if a.ratio_level != "token" and a.updates_per_rollout == 1:
        _warn(
            f"ratio_level={a.ratio_level!r} with one update per rollout: the ratio is always 1, so "
            "the sequence ratio and its clip change nothing. GSPO uses minibatches=4 (§5.1).",
        )
