"""`Algorithm`: one point in the GRPO-family factor space.

Every factor is one field, documented once by the string under it. Published algorithms are
instances in `baselines/`; an ablation is `dataclasses.replace(preset, field=value)`. No string
ever chooses two factors (TRL's `loss_type="dr_grpo"` does not remove the std scaling: here the
two are separate fields, `loss_agg` and `scale`).

`advantage` chooses the estimator: "group" (the GRPO family) or "gae" (PPO's learned critic, the
comparison's reference row); the fields of the other estimator are refused when set.

This module knows only the standard library: the `Literal` value sets below are the contract,
and a test checks that they equal the names in `objective`'s registries.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
import warnings
from dataclasses import dataclass, fields
from typing import Any, Literal, get_args, get_type_hints

from ablate.errors import AblateWarning, ConfigError

Baseline = Literal["group_mean", "leave_one_out", "none"]
Scale = Literal["group_std", "batch_std", "batch_centred_std", "token_whiten", "none"]
RatioLevel = Literal["token", "sequence", "sequence_token"]
LossAgg = Literal[
    "token_mean",
    "seq_mean_token_mean",
    "seq_mean_token_sum",
    "seq_mean_token_sum_norm",
    "prompt_mean",
    "token_sum",
]
Surrogate = Literal["clip", "cispo", "sapo", "gmpo", "clip_cov", "kl_cov"]
RolloutCorrection = Literal["none", "token_truncate", "sequence_mask"]
KLEstimator = Literal["k1", "k2", "k3"]
KLIn = Literal["loss", "reward"]
AdvantageName = Literal["group", "gae"]

# Aggregations that sum token losses inside a sequence: with a sequence-level ratio each
# sequence's (single) loss is then counted |o_i| times, i.e. weighted by its length (trl#3823).
TOKEN_SUMMING_AGGS = (
    "token_mean",
    "seq_mean_token_sum",
    "seq_mean_token_sum_norm",
    "prompt_mean",
    "token_sum",
)

#: DAPO's soft-overlong buffer as a share of the max generation length: 4,096 / 20,480 (§4.1).
DAPO_BUFFER_SHARE = "20%"
_SHARE = re.compile(r"(\d+(?:\.\d+)?)%")


@dataclass(frozen=True, kw_only=True)
class Algorithm:
    """A GRPO-family algorithm as a point in factor space (defaults: GRPO's core without KL)."""

    # --- advantages -----------------------------------------------------------------------
    advantage: AdvantageName = "group"
    """Advantage estimator: group-relative rewards (GRPO family) or a learned critic + GAE (PPO)."""
    baseline: Baseline = "group_mean"
    """Reward baseline: group mean (GRPO), leave-one-out mean (RLOO), or none (REINFORCE++)."""
    scale: Scale = "group_std"
    """Divide by group std, batch std of rewards or of centred rewards; token-whiten; or none."""
    std_unbiased: bool = True
    """Std with N-1 (`torch.std`'s default, which TRL, verl and oat use) instead of N."""
    std_eps: float = 1e-6
    """Added to the std before dividing (TRL 1e-4, verl 1e-6, oat 1e-8)."""

    # --- critic (advantage="gae" only; defaults = TRL's PPO) ------------------------------
    gae_gamma: float = 1.0
    """GAE discount gamma over completion tokens (1 = undiscounted outcome reward; TRL, verl)."""
    gae_lambda: float = 0.95
    """GAE lambda: 1 = Monte-Carlo return minus value, 0 = one-step TD error (TRL 0.95)."""
    vf_coef: float = 0.1
    """Weight of the value loss added to the policy loss (PPO Eq. 9's c1; TRL 0.1)."""
    vf_clip: float | None = 0.2
    """Value clip range: V is clipped to V_old ± vf_clip in the value loss; None = off (TRL 0.2)."""
    whiten_advantages: bool = True
    """Whiten the GAE advantages over the batch's completion tokens (masked mean and std)."""
    critic_lr: float | None = None
    """Learning rate of the value head; None = the policy's learning rate."""

    # --- importance ratio -----------------------------------------------------------------
    ratio_level: RatioLevel = "token"
    """Per-token ratio (PPO/GRPO), GSPO's length-normalised sequence ratio, or GSPO-token."""

    # --- surrogate and clipping -----------------------------------------------------------
    surrogate: Surrogate = "clip"
    """Policy objective: PPO clip, CISPO, SAPO gates, GMPO geometric mean, Clip-Cov, KL-Cov."""
    clip_low: float = 0.2
    """Lower clip: the ratio is clipped at 1 - clip_low (gmpo: the log-ratio at -clip_low)."""
    clip_high: float = 0.2
    """Upper clip: the ratio is clipped at 1 + clip_high (gmpo: the log-ratio at +clip_high)."""
    dual_clip: float | None = None
    """Dual-clip constant c > 1: negative-advantage token losses are capped at -A·c; None = off."""
    sapo_tau_pos: float = 1.0
    """SAPO's gate temperature for tokens with a positive advantage."""
    sapo_tau_neg: float = 1.05
    """SAPO's gate temperature for tokens with a non-positive advantage."""
    cov_fraction: float = 2e-4
    """Clip-Cov / KL-Cov: share of tokens (picked by covariance) detached / KL-penalised."""
    cov_clip_low: float = 1.0
    """Clip-Cov: tokens are drawn from those with covariance above this."""
    cov_clip_high: float = 5.0
    """Clip-Cov: tokens are drawn from those with covariance below this."""
    kl_cov_coef: float = 1.0
    """KL-Cov: weight of |log ratio| on the selected tokens."""

    # --- aggregation ----------------------------------------------------------------------
    loss_agg: LossAgg = "seq_mean_token_mean"
    """Token losses to one number: token mean/sum, seq mean of token mean/sum/sum÷L, prompt mean."""
    loss_norm_constant: int | None = None
    """L of seq_mean_token_sum_norm; None = the budget's max new tokens (set by `resolve`)."""

    # --- KL and entropy -------------------------------------------------------------------
    kl_coef: float = 0.0
    """Weight of the KL to the reference policy; 0 = no reference model is loaded."""
    kl_estimator: KLEstimator = "k3"
    """Per-token KL estimator (Schulman's k1, k2, k3)."""
    kl_in: KLIn = "loss"
    """Add the KL per token to the loss, or subtract it from the reward before the advantages."""
    entropy_coef: float = 0.0
    """Weight of the per-token entropy bonus (subtracted from the loss before aggregation)."""

    # --- data side ------------------------------------------------------------------------
    dynamic_sampling: bool = False
    """Keep only groups whose rewards are not all equal, generating extra batches to refill."""
    max_gen_batches: int = 10
    """Most generation batches per step under dynamic sampling before the step fails."""
    mask_truncated: bool = False
    """Overlong filtering: truncated completions contribute no tokens to the loss."""
    overlong_buffer: int | str = 0
    """Soft overlong punishment buffer: tokens (0 = off) or a share of max new tokens ("20%")."""
    overlong_penalty: float = 1.0
    """Reward penalty reached at the max generation length (DAPO Eq. 13)."""
    zero_variance_filter: bool = False
    """Drop groups whose rewards are all equal, without generating more to refill."""
    retire_pass_rate: float | None = None
    """No-Positive-Resampling: retire a prompt once its pass rate reaches this; None = off."""
    random_reward: float | None = None
    """Control arm: reward 1 with this probability, whatever the answer; None = the verifier's."""

    # --- off-policy correction --------------------------------------------------------------
    rollout_correction: RolloutCorrection = "none"
    """Weight losses by trainer/engine probability: per token capped, or per sequence masked."""
    rollout_correction_cap: float = 3.0
    """The cap of `rollout_correction`."""

    # --- update schedule ------------------------------------------------------------------
    ppo_epochs: int = 1
    """Passes over each rollout batch."""
    minibatches: int = 1
    """Optimizer steps per pass over a rollout batch (1 update per rollout: the ratio stays 1)."""

    def __post_init__(self) -> None:
        problems = _literal_problems(self) + _range_problems(self) + _cross_field_problems(self)
        if problems:
            raise ConfigError("invalid Algorithm:\n  - " + "\n  - ".join(problems))
        _warn_about_inert_factors(self)

    def diff(self, other: Algorithm) -> dict[str, tuple[Any, Any]]:
        """The fields whose values differ: {field: (value in self, value in other)}."""
        return {
            f.name: (getattr(self, f.name), getattr(other, f.name))
            for f in fields(self)
            if getattr(self, f.name) != getattr(other, f.name)
        }

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def updates_per_rollout(self) -> int:
        return self.ppo_epochs * self.minibatches

    def resolve(self, *, max_new_tokens: int) -> Algorithm:
        """Fill the budget-dependent values (`loss_norm_constant`, `overlong_buffer`) and check
        that the algorithm fits a budget of `max_new_tokens`."""
        if max_new_tokens < 1:
            raise ConfigError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        norm = self.loss_norm_constant
        if norm is None and self.loss_agg == "seq_mean_token_sum_norm":
            norm = max_new_tokens
        buffer = self.overlong_buffer
        if isinstance(buffer, str):
            buffer = max(1, round(float(buffer[:-1]) / 100 * max_new_tokens))
        if buffer >= max_new_tokens:
            raise ConfigError(
                f"overlong_buffer={buffer} must be smaller than max_new_tokens={max_new_tokens}; "
                f"use a share, e.g. overlong_buffer={DAPO_BUFFER_SHARE!r} (DAPO's)"
            )
        return dataclasses.replace(self, loss_norm_constant=norm, overlong_buffer=buffer)


def field_docs() -> dict[str, str]:
    """Each field's one-line docstring, read from the source (for the CLI and README)."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(Algorithm))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, nxt in itertools.pairwise(body):
        if isinstance(node, ast.AnnAssign) and isinstance(nxt, ast.Expr):
            docs[node.target.id] = nxt.value.value  # type: ignore[union-attr]
    return docs


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
    # CISPO truncates a stop-gradient weight: a bound of 0 (clip_low=1) is MiniMax's "no lower
    # bound"; a PPO clip at ratio 0 would be a mistake.
    low_max = 1.0 if a.surrogate == "cispo" else 1.0 - 1e-12
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


def _warn_about_inert_factors(a: Algorithm) -> None:
    if a.surrogate == "gmpo" and a.loss_agg != "seq_mean_token_mean":
        warnings.warn(
            f"surrogate='gmpo' with loss_agg={a.loss_agg!r}: GMPO's loss is one number per "
            "sequence, averaged over sequences (loss_agg='seq_mean_token_mean'); other modes "
            "weight sequences by their length",
            AblateWarning,
            stacklevel=4,
        )
    if a.ratio_level != "token" and a.loss_agg in TOKEN_SUMMING_AGGS:
        warnings.warn(
            f"ratio_level={a.ratio_level!r} with loss_agg={a.loss_agg!r}: each sequence's loss is "
            "counted once per token, so sequences are weighted by their length (trl#3823). GSPO's "
            "objective is loss_agg='seq_mean_token_mean'.",
            AblateWarning,
            stacklevel=4,
        )
    if a.ratio_level != "token" and a.updates_per_rollout == 1:
        warnings.warn(
            f"ratio_level={a.ratio_level!r} with one update per rollout: the ratio is always 1, so "
            "the sequence ratio and its clip change nothing. GSPO uses minibatches=4 (§5.1).",
            AblateWarning,
            stacklevel=4,
        )
