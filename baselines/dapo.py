"""DAPO — Yu et al. 2025, "DAPO: An Open-Source LLM Reinforcement Learning System at Scale"
(arXiv 2503.14476); reference recipe verl `recipe/dapo`."""

import dataclasses

from ablate.baselines.grpo import ALGORITHM as GRPO

ALGORITHM = dataclasses.replace(
    GRPO,
    clip_high=0.28,  # §3.1 Clip-Higher; §4.1: epsilon_low 0.2, epsilon_high 0.28
    loss_agg="token_mean",  # §3.3 Token-Level Policy Gradient Loss, Eq. 12
    kl_coef=0.0,  # §2.3 Removing KL Divergence
    dynamic_sampling=True,  # §3.2 Dynamic Sampling: keep groups with 0 < #correct < G
    max_gen_batches=10,  # verl recipe/dapo config: max_num_gen_batches=10
    mask_truncated=False,  # §3.4: the final recipe uses soft punishment, not overlong filtering
    overlong_buffer="20%",  # §3.4 Eq. 13 + §4.1: a 4,096-token cache of 20,480 max tokens, kept
    # as that share of whatever max new tokens the trial's budget sets
    overlong_penalty=1.0,  # Eq. 13: the length reward reaches -1 at L_max
    minibatches=16,  # §4.1: 512 prompts x 16 responses, mini-batch 512 -> 16 updates per rollout
)
