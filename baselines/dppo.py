"""DPPO (Binary-TV) — Qi et al. 2026, "Rethinking the Trust Region in LLM Reinforcement
Learning" (arXiv 2602.04879); reference code verl 0.9.1 `policy_loss.loss_mode=dppo_tv` and its
example script `examples/dppo_trainer/run_qwen3_30b_a3b_megatron.sh` (verl-project/verl @
08aef7f), whose settings the preset copies.

PPO's ratio clip becomes a mask on the total-variation change of each token's probability: a
token with A > 0 keeps its gradient while π - π_old <= 0.15, one with A <= 0 while π - π_old >=
-0.15; kept tokens are weighted by the detached ratio (truncated IS, capped at clip_ratio_c).
prime-rl's default loss is of this family too (peers-2026 notes).

Not modelled: the script's dynamic micro-batching and Megatron parallelism (no effect on the
loss), 8,192-token responses and Qwen3-30B-A3B."""

import dataclasses

from ablate.baselines.grpo import ALGORITHM as GRPO

ALGORITHM = dataclasses.replace(
    GRPO,  # script: algorithm.adv_estimator=grpo (group mean baseline)
    scale="none",  # script: algorithm.norm_adv_by_std_in_grpo=False
    trust_region="dppo_tv",  # script: policy_loss.loss_mode=${LOSS_MODE:-dppo_tv}
    clip_low=0.15,  # script: CLIP_DEFAULT=0.15 for dppo_tv (the TV threshold, A <= 0)
    clip_high=0.15,  # script: CLIP_DEFAULT=0.15 for dppo_tv (the TV threshold, A > 0)
    ratio_cap=10000.0,  # script: actor.clip_ratio_c=10000.0 (the truncated-IS cap)
    loss_agg="seq_mean_token_sum_norm",  # script: actor.loss_agg_mode=seq-mean-token-sum-norm
    kl_coef=0.0,  # script: actor.use_kl_loss=False, algorithm.use_kl_in_reward=False
    minibatches=8,  # script: train_batch_size 256 / ppo_mini_batch_size 32 prompts
)
