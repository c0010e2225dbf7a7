"""verl 0.9.1's config key prefixes and the notes and helpers its tables share."""

from __future__ import annotations

from ablate.base.errors import ConfigError
from ablate.peers.model import PeerBudget, exact

A = "actor_rollout_ref.actor."
PL = A + "policy_loss."
ALG = "algorithm."
RC = ALG + "rollout_correction."
OB = "+reward.reward_kwargs.overlong_buffer_cfg."

CRITIC = "verl's critic is a separate model with its own optimizer (critic.*)"
NEVER_BINDS = 1e9  # above verl's largest ratio e^20 (its log-ratio clamp): a clip that never binds
RS_FLOOR = "1e-10"  # below verl's smallest IS weight e^-20: an IcePop floor that never masks


def mini_batch(a, b: PeerBudget) -> int:

    if b.prompts % a.minibatches:
        raise ConfigError(
            f"verl's mini-batch is whole prompts: {b.prompts} prompts per step do not split into "
            f"{a.minibatches} mini-batches; pass --prompts as a multiple of {a.minibatches}"
        )
    return b.prompts // a.minibatches


def k_note(k: str) -> str:
    if k == "k3":
        return "verl clamps k3 at 10 per token (ablate does not)"
    return ""


def correction(level: str):
    return exact(
        {
            RC + "rollout_is": level,
            RC + "rollout_rs": None,
            "actor_rollout_ref.rollout.calculate_log_probs": True,
        },
        "decoupled mode: weights π_old/π_rollout on the policy loss",
    )


def rejection(option: str):
    return exact(
        {
            RC + "rollout_is": None,
            RC + "rollout_rs": option,
            "actor_rollout_ref.rollout.calculate_log_probs": True,
        },
        "decoupled mode: the rejected tokens leave response_mask",
    )


GROUP_NOTE = "verl's grpo estimator"
PER_MICRO_BATCH = (
    "verl takes the covariance and picks cov_fraction of the tokens per micro-batch on each GPU; "
    "ablate over the whole minibatch (the same with one micro-batch per mini-batch)"
)
GSPO_NOTE = (
    "verl's gspo is GSPO-token (sg[s_i]·π/sg[π]), equal to the sequence ratio in value and "
    "gradient when the advantage is constant over a sequence; its log-ratio is capped at 10"
)
