"""`Algorithm`: one point in the GRPO-family factor space.

Every factor is one field, documented once by the string under it. Published algorithms are
instances in `baselines/`; an ablation is `dataclasses.replace(preset, field=value)`. No string
ever chooses two factors (TRL's `loss_type="dr_grpo"` does not remove the std scaling: here the
two are separate fields, `loss_agg` and `scale`).

`advantage` chooses the estimator: "group" (the GRPO family) or "gae" (PPO's learned critic, the
comparison's reference row); the fields of the other estimator are refused when set.

The `Literal` value sets below are the contract, and a test checks that they equal the names in
`objective`'s registries. Which fields each value reads is declared by its registry entry
(`reads=`); `algorithm_checks` derives the checks from those declarations.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
from dataclasses import InitVar, dataclass, fields
from typing import Any, Literal

from ablate.base.errors import ConfigError
from ablate.factors.checks import DAPO_BUFFER_SHARE, problems, warn_about_inert_factors

Baseline = Literal["group_mean", "leave_one_out", "none"]
Scale = Literal["group_std", "batch_std", "batch_centred_std", "token_whiten", "mean", "none"]
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
TrustRegion = Literal["ratio_clip", "dppo_tv", "dppo_kl"]
RolloutCorrection = Literal[
    "none", "token_truncate", "token_mis", "sequence_mask", "geo_rs", "k3_rs", "opsm", "m2po"
]
RolloutPrecision = Literal["trainer", "bf16", "fp16"]
KLEstimator = Literal["k1", "k2", "k3"]
KLIn = Literal["loss", "reward"]
AdvantageName = Literal["group", "gae"]
RewardControl = Literal["none", "random", "noisy", "incorrect", "majority_vote", "format_only"]


@dataclass(frozen=True, kw_only=True)
class Algorithm:
    """A GRPO-family algorithm as a point in factor space (defaults: GRPO's core without KL)."""

    # --- advantages -----------------------------------------------------------------------
    advantage: AdvantageName = "group"
    """Advantage estimator: group-relative rewards (GRPO family) or a learned critic + GAE (PPO)."""
    baseline: Baseline = "group_mean"
    """Reward baseline: group mean (GRPO), leave-one-out mean (RLOO), or none (REINFORCE++)."""
    scale: Scale = "group_std"
    """Divide by group std, batch std of rewards or of centred ones, token-whiten, mean (MaxRL)."""
    std_unbiased: bool = True
    """Std with N-1 (`torch.std`'s default, which TRL, verl and oat use) instead of N."""
    std_eps: float = 1e-6
    """Added to the std (scale="mean": the mean) before dividing (TRL 1e-4, verl 1e-6)."""
    positive_weight: float = 1.0
    """Advantage-sign weighting: positive advantages are multiplied by this (W-REINFORCE 0.1)."""

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
    """Lower clip: the ratio is clipped at 1 - clip_low (gmpo: log-ratio; DPPO: divergence)."""
    clip_high: float = 0.2
    """Upper clip: the ratio is clipped at 1 + clip_high (gmpo: log-ratio; DPPO: divergence)."""
    trust_region: TrustRegion = "ratio_clip"
    """The clip surrogate's trust region: PPO's ratio clip, or DPPO's binary TV / KL mask."""
    ratio_cap: float | None = None
    """DPPO: the detached ratio weighting each kept token is capped here; None = no cap."""
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
    reward_control: RewardControl = "none"
    """Control arm: random, partly random (noisy), wrong-label, majority-vote or format rewards."""
    reward_control_p: float = 0.5
    """reward_control="random" or "noisy": the probability of reward 1 (Spurious Rewards 0.5)."""
    reward_noise_fraction: float = 0.5
    """reward_control="noisy": the share of samples whose reward is the random control's coin."""
    reward_floor: float = 0.0
    """The training reward of a wrong answer: rewards r in [0, 1] become floor + (1 - floor)·r."""

    # The field the reward controls replaced: refused with its new spelling (`renamed_field`).
    random_reward: InitVar[float | None] = None

    # --- off-policy correction --------------------------------------------------------------
    rollout_correction: RolloutCorrection = "none"
    """Engine-vs-trainer correction: TIS, MIS/IcePop, seq mask, geo/k3 rejection, OPSM, M2PO."""
    rollout_correction_cap: float = 3.0
    """Upper ratio bound: TIS cap, MIS/IcePop and geo_rs band top (β), sequence_mask's cap."""
    rollout_correction_floor: float | None = None
    """Lower ratio bound of token_mis and geo_rs (separate from the cap); None = 1/cap."""
    rejection_k3_max: float = 0.01
    """k3_rs: a sequence whose mean per-token k3 KL(engine || trainer) exceeds it is rejected."""
    opsm_delta: float = 0.5
    """opsm: δ, the mean KL a negative-advantage sequence may have before it is masked."""
    m2po_threshold: float = 0.04
    """m2po: τ, the mean (log ρ)² over the batch the rejected tokens bring the rest below."""

    # --- train–inference mismatch (engine settings an arm may vary) ---------------------------
    rollout_precision: RolloutPrecision = "trainer"
    """The engine's weights and compute: the trainer's own, or a bf16/fp16 copy (vLLM-like)."""
    rollout_staleness: int = 0
    """Rollouts come from the policy this many updates old (asynchronous trainers' lag k)."""

    # --- update schedule ------------------------------------------------------------------
    ppo_epochs: int = 1
    """Passes over each rollout batch."""
    minibatches: int = 1
    """Optimizer steps per pass over a rollout batch (1 update per rollout: the ratio stays 1)."""

    def __post_init__(self, random_reward: float | None) -> None:
        if random_reward is not None:
            raise ConfigError(renamed_field("random_reward", random_reward))
        found = problems(self)
        if found:
            raise ConfigError("invalid Algorithm:\n  - " + "\n  - ".join(found))
        warn_about_inert_factors(self)

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


def renamed_field(name: str, value: Any) -> str:
    """The one-line error for a field an old study or config still sets, with its new spelling."""
    if name == "random_reward":
        return (
            f"random_reward={value!r} is now written reward_control='random', "
            f"reward_control_p={value!r} (random_reward was replaced by reward_control)"
        )
    raise KeyError(name)


#: Fields that were renamed: saved studies and configs that set them get `renamed_field`'s error.
RENAMED = ("random_reward",)


def field_docs() -> dict[str, str]:
    """Each field's one-line docstring, read from the source (for the CLI and README)."""

    tree = ast.parse(inspect.getsource(Algorithm))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, nxt in itertools.pairwise(body):
        if isinstance(node, ast.AnnAssign) and isinstance(nxt, ast.Expr):
            docs[node.target.id] = nxt.value.value  # type: ignore[union-attr]
    return docs
