"""`Algorithm`: one point in the GRPO-family factor space.

Every factor is one field, documented once by the string under it. Published algorithms are
instances in `baselines/`; an ablation is `dataclasses.replace(preset, field=value)`. No string
ever chooses two factors (TRL's `loss_type="dr_grpo"` does not remove the std scaling: here the
two are separate fields, `loss_agg` and `scale`).

This module knows only the standard library: the `Literal` value sets below are the contract,
and a test checks that they equal the names in `objective`'s registries.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import warnings
from dataclasses import dataclass, fields
from typing import Any, Literal, get_args, get_type_hints

from ablate.errors import ConfigError

Baseline = Literal["group_mean", "leave_one_out"]
Scale = Literal["group_std", "batch_std", "none"]
RatioLevel = Literal["token", "sequence", "sequence_token"]
LossAgg = Literal[
    "token_mean", "seq_mean_token_mean", "seq_mean_token_sum", "seq_mean_token_sum_norm"
]
KLEstimator = Literal["k1", "k2", "k3"]
KLIn = Literal["loss", "reward"]

# Aggregations that sum token losses inside a sequence: with a sequence-level ratio each
# sequence's (single) loss is then counted |o_i| times, i.e. weighted by its length (trl#3823).
TOKEN_SUMMING_AGGS = ("token_mean", "seq_mean_token_sum", "seq_mean_token_sum_norm")

#: DAPO's soft-overlong buffer as a share of the max generation length: 4,096 / 20,480 (§4.1).
DAPO_BUFFER_SHARE = 4096 / 20480


@dataclass(frozen=True, kw_only=True)
class Algorithm:
    """A GRPO-family algorithm as a point in factor space (defaults: GRPO's core without KL)."""

    # --- advantages -----------------------------------------------------------------------
    baseline: Baseline = "group_mean"
    """Reward baseline within a group: group mean (GRPO) or leave-one-out mean (RLOO)."""
    scale: Scale = "group_std"
    """Divide centred rewards by the group's std, the whole batch's std, or nothing (Dr. GRPO)."""
    std_unbiased: bool = True
    """Std with N-1 (TRL, verl, oat) instead of N (the tutorial's formula)."""
    std_eps: float = 1e-6
    """Added to the std before dividing (TRL 1e-4, verl 1e-6, oat 1e-8)."""

    # --- importance ratio -----------------------------------------------------------------
    ratio_level: RatioLevel = "token"
    """Per-token ratio (PPO/GRPO), GSPO's length-normalised sequence ratio, or GSPO-token."""

    # --- clipping -------------------------------------------------------------------------
    clip_low: float = 0.2
    """Lower clip: the ratio is clipped at 1 - clip_low."""
    clip_high: float = 0.2
    """Upper clip: the ratio is clipped at 1 + clip_high (clip-higher: clip_high > clip_low)."""
    dual_clip: float | None = None
    """Dual-clip constant c > 1: negative-advantage token losses are capped at -A·c; None = off."""

    # --- aggregation ----------------------------------------------------------------------
    loss_agg: LossAgg = "seq_mean_token_mean"
    """How token losses become one number: token mean, sequence mean of token means/sums/sums÷L."""
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
    overlong_buffer: int | None = 0
    """Soft overlong punishment buffer in tokens; 0 = off, None = DAPO's 20% of max new tokens."""
    overlong_penalty: float = 1.0
    """Reward penalty reached at the max generation length (DAPO Eq. 13)."""

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
        if buffer is None:
            buffer = max(1, round(DAPO_BUFFER_SHARE * max_new_tokens))
        if buffer >= max_new_tokens:
            raise ConfigError(
                f"overlong_buffer={buffer} must be smaller than max_new_tokens={max_new_tokens}; "
                "use overlong_buffer=None for DAPO's 20% share of the generation budget"
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
    for name in ("std_eps", "clip_low", "clip_high", "kl_coef", "entropy_coef", "overlong_penalty"):
        v = getattr(a, name)
        if not _finite(v) or v < 0:
            p.append(f"{name}={v!r} must be a finite number >= 0")
    if _finite(a.clip_low) and a.clip_low >= 1:
        p.append(f"clip_low={a.clip_low} must be < 1 (the ratio is clipped at 1 - clip_low > 0)")
    if a.dual_clip is not None and (not _finite(a.dual_clip) or a.dual_clip <= 1):
        p.append(f"dual_clip={a.dual_clip!r} must be None (off) or a number > 1 (verl uses 3.0)")
    for name in ("max_gen_batches", "ppo_epochs", "minibatches"):
        v = getattr(a, name)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            p.append(f"{name}={v!r} must be an integer >= 1")
    b = a.overlong_buffer
    if b is not None and (not isinstance(b, int) or isinstance(b, bool) or b < 0):
        p.append(f"overlong_buffer={b!r} must be an integer >= 0 (0 = off) or None (DAPO's share)")
    c = a.loss_norm_constant
    if c is not None and (not isinstance(c, int) or isinstance(c, bool) or c < 1):
        p.append(f"loss_norm_constant={c!r} must be a positive integer or None (max new tokens)")
    for name in ("std_unbiased", "dynamic_sampling", "mask_truncated"):
        if not isinstance(getattr(a, name), bool):
            p.append(f"{name}={getattr(a, name)!r} must be True or False")
    return p


def _cross_field_problems(a: Algorithm) -> list[str]:
    p = []
    if a.loss_norm_constant is not None and a.loss_agg != "seq_mean_token_sum_norm":
        p.append(
            f"loss_norm_constant={a.loss_norm_constant} only applies to "
            f"loss_agg='seq_mean_token_sum_norm' (got {a.loss_agg!r}); set it to None"
        )
    if a.overlong_buffer != 0 and _finite(a.overlong_penalty) and a.overlong_penalty == 0:
        p.append("overlong_buffer is on but overlong_penalty=0 makes it a no-op; set one of them")
    return p


def _warn_about_inert_factors(a: Algorithm) -> None:
    if a.ratio_level != "token" and a.loss_agg in TOKEN_SUMMING_AGGS:
        warnings.warn(
            f"ratio_level={a.ratio_level!r} with loss_agg={a.loss_agg!r}: each sequence's loss is "
            "counted once per token, so sequences are weighted by their length (trl#3823). GSPO's "
            "objective is loss_agg='seq_mean_token_mean'.",
            UserWarning,
            stacklevel=4,
        )
    if a.ratio_level != "token" and a.updates_per_rollout == 1:
        warnings.warn(
            f"ratio_level={a.ratio_level!r} with one update per rollout: the ratio is always 1, so "
            "the sequence ratio and its clip change nothing. GSPO uses minibatches=4 (§5.1).",
            UserWarning,
            stacklevel=4,
        )
