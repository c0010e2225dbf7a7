"""RLOO — Ahmadian et al. 2024, "Back to Basics: Revisiting REINFORCE Style Optimization for
Learning from Human Feedback in LLMs" (arXiv 2402.14740). Reference implementation: TRL 1.16.0
`RLOOTrainer` / `RLOOConfig`, whose defaults are cited below.

REINFORCE with k samples per prompt, each judged against the mean reward of the other k - 1
(leave-one-out baseline, no std scaling), the whole completion treated as one action. In TRL
the loss of a completion is its sequence ratio (summed token log-probs) times the advantage,
averaged over completions; with one update per rollout (TRL num_iterations=1) the ratio is 1 and
its gradient is A · Σ_t ∇log π: ablate's seq_mean_token_sum. The KL to the reference enters the
reward as β · Σ_t (log π_old - log π_ref) per completion: ablate's k1 in the reward."""

import dataclasses

from ablate.baselines.grpo import ALGORITHM as GRPO

ALGORITHM = dataclasses.replace(
    GRPO,
    baseline="leave_one_out",  # RLOO: baseline = mean reward of the other k - 1 samples
    scale="none",  # TRL RLOOConfig normalize_advantages=False: no std scaling
    loss_agg="seq_mean_token_sum",  # TRL: per-sequence loss (summed log-probs), .mean()
    kl_coef=0.05,  # TRL RLOOConfig beta=0.05
    kl_estimator="k1",  # TRL: per_token_kl = old_logps - ref_logps, summed per completion
    kl_in="reward",  # TRL: rewards = rewards - beta * kl, before the leave-one-out baseline
)
