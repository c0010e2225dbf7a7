"""KL-Cov — Cui et al. 2025, "The Entropy Mechanism of Reinforcement Learning for Reasoning
Language Models" (arXiv 2505.22617). Reference implementation: the authors' repository
PRIME-RL/Entropy-Mechanism-of-RL (a verl fork; scripts `recipe/dapo/7b_kl_cov.sh` and
`32b_kl_cov.sh`), merged into verl as `policy_loss.loss_mode=kl_cov` (verl 0.9.1
`compute_policy_loss_kl_cov`).

KL-Cov drops the PPO clip and adds kl_cov_coef · |log r| to the loss of the top cov_fraction of
tokens ranked by the covariance (A - mean A)(log π - mean log π). The authors run it on verl's
DAPO recipe: GRPO advantages, token-mean loss, dynamic sampling (filter_groups on accuracy, max
10 generation batches), no KL to a reference, no overlong buffer, 256 prompts x 8 responses
with PPO mini-batches of 32 prompts.

The share of tokens depends on model size in the authors' scripts: k_percent=0.2 (percent:
2e-3 of the tokens) for Qwen2.5-7B and 0.02 (2e-4) for Qwen2.5-32B; the preset takes the
smaller model's 2e-3. verl's defaults differ: kl_cov_ratio 0.0002 and ppo_kl_coef 0.1 in
actor.yaml (the code falls back to 1.0 only when the config value is None); the authors use 1."""

import dataclasses

from ablate.baselines.grpo import ALGORITHM as GRPO

ALGORITHM = dataclasses.replace(
    GRPO,  # scripts: adv_estimator=grpo (group-std advantages)
    surrogate="kl_cov",  # scripts: loss_mode="kl_cov" (no PPO clip)
    cov_fraction=2e-3,  # 7b_kl_cov.sh: k_percent=0.2, a percentage (the code divides by 100)
    kl_cov_coef=1.0,  # scripts (7B and 32B): ppo_kl_coef=1
    loss_agg="token_mean",  # scripts: loss_agg_mode="token-mean"
    kl_coef=0.0,  # scripts: use_kl_loss=False, use_kl_in_reward=False
    dynamic_sampling=True,  # scripts: enable_filter_groups=True, metric acc, max 10 batches
    minibatches=8,  # scripts: train_prompt_bsz=256, ppo_mini_batch_size=32 -> 8 updates
)
