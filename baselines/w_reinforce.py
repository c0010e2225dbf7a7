"""W-REINFORCE — Zhu et al. 2025, "The Surprising Effectiveness of Negative Reinforcement in LLM
Reasoning" (arXiv 2506.01347); reference code TianHongZXY/RLVR-Decomposed @ 84be7a2
(`compute_psr_nsr_outcome_advantage` with advantage="weighted", and
`run_qwen2.5-math-7b_psr_nsr.sh`).

The objective is λ·L_PSR + L_NSR with λ = 0.1 (§5): REINFORCE on ±1 rewards with no baseline,
the positive samples' term weighted by λ. The code computes the advantage from 0/1 scores as λ
for a correct sample and 0 - 1 = -1 for a wrong one, then applies verl's PPO clip loss with a
token mean. Here: rewards floored at -1 (so a wrong answer's reward is -1), no baseline, no
scale, positive advantages times 0.1.

Not modelled: the entropy bonus of that verl version's default config [unverified], dynamic
batch sizes (no effect on the loss), Qwen2.5-Math-7B and 3,072-token responses."""

import dataclasses

from ablate.baselines.grpo import ALGORITHM as GRPO

ALGORITHM = dataclasses.replace(
    GRPO,
    baseline="none",  # code: advantages = returns (the outcome score), no group baseline
    scale="none",  # code: no std division
    reward_floor=-1.0,  # code: a wrong sample's advantage is its score 0 minus 1 = -1
    positive_weight=0.1,  # §5: λ = 0.1; code: advantages[correct] *= positive_advantage_weight
    loss_agg="token_mean",  # code: compute_policy_loss's masked_mean over all tokens
    kl_coef=0.0,  # script: kl_coef=0.0
    minibatches=4,  # script: train_batch_size 1024 / ppo_mini_batch_size 256 prompts
)
