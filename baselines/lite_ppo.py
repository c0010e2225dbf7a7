"""Lite PPO — Liu et al. 2025, "Part I: Tricks or Traps? A Deep Dive into RL for LLM Reasoning"
(arXiv 2508.08221). Reference implementation: the ROLL framework the paper uses; TRL reproduces
it in its docs (`paper_index.md`, "Part I: Tricks or Traps?") as GRPOConfig(scale_rewards="batch",
loss_type="dapo", beta=0.0, num_iterations=1, steps_per_generation=8, num_generations=8).

Lite PPO is two techniques on a critic-free vanilla PPO loss: advantages centred on the group
mean but divided by the std of the rewards over the whole batch ("group-level mean, batch-level
std", Takeaway 3), and the token-level loss (Takeaway 7, for base models); no clip-higher, no
dynamic sampling, no overlong filtering. The KL and the update schedule come from TRL's
reproduction (TRL's reading of the paper, not checked in the paper's text)."""

import dataclasses

from ablate.baselines.grpo import ALGORITHM as GRPO

ALGORITHM = dataclasses.replace(
    GRPO,  # vanilla PPO clip (0.2 both sides), group-mean baseline, no critic
    scale="batch_std",  # group mean, batch std of the rewards; TRL scale_rewards="batch"
    loss_agg="token_mean",  # token-level loss aggregation; TRL loss_type="dapo"
    kl_coef=0.0,  # TRL's reproduction: beta=0.0 ("= init_kl_coef in the paper")
    minibatches=8,  # TRL's reproduction: steps_per_generation=8 = rollout (128 prompts x 8)
    # over 128-completion optimizer steps; one epoch (num_iterations=1 = ppo_epochs)
)
