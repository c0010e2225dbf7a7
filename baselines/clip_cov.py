"""Clip-Cov — Cui et al. 2025, "The Entropy Mechanism of Reinforcement Learning for Reasoning
Language Models" (arXiv 2505.22617). Reference implementation: the authors' repository
PRIME-RL/Entropy-Mechanism-of-RL (a verl fork; scripts `recipe/dapo/7b_clip_cov.sh` and
`32b_clip_cov.sh`), merged into verl as `policy_loss.loss_mode=clip_cov` (verl 0.9.1
`compute_policy_loss_clip_cov`, "Adapted from" the authors' code).

Clip-Cov detaches the gradient of a random cov_fraction of the tokens whose covariance
(A - mean A)(log π - mean log π) lies in (cov_clip_low, cov_clip_high), among tokens the PPO clip
did not already clip. The authors run it on verl's DAPO recipe: GRPO advantages, token-mean
loss, dynamic sampling (filter_groups on accuracy, max 10 generation batches), no KL, no
overlong buffer, 256 prompts x 8 responses with PPO mini-batches of 32 prompts.

The scripts set clip_ratio_low=clip_ratio_high=1: the PPO clip keeps only an upper bound at
ratio 2 (the lower bound is 0), so covariance selection, not the clip, is what holds updates
back."""

import dataclasses

from ablate.baselines.grpo import ALGORITHM as GRPO

ALGORITHM = dataclasses.replace(
    GRPO,  # scripts: adv_estimator=grpo (group-std advantages)
    surrogate="clip_cov",  # scripts: loss_mode="clip_cov"
    clip_low=1.0,  # scripts: clip_ratio_low=1 (no lower bound)
    clip_high=1.0,  # scripts: clip_ratio_high=1 (ratio capped at 2)
    cov_fraction=2e-4,  # scripts: clip_cov_ratio=0.0002 (7B and 32B); verl default 0.0002
    cov_clip_low=1.0,  # scripts: clip_cov_lb=1.0; verl default 1.0
    cov_clip_high=5.0,  # scripts: clip_cov_ub=5.0; verl default 5.0
    loss_agg="token_mean",  # scripts: loss_agg_mode="token-mean"
    kl_coef=0.0,  # scripts: use_kl_loss=False, use_kl_in_reward=False
    dynamic_sampling=True,  # scripts: enable_filter_groups=True, metric acc, max 10 batches
    minibatches=8,  # scripts: train_prompt_bsz=256, ppo_mini_batch_size=32 -> 8 updates
)
