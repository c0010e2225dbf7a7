"""REINFORCE++ with baseline — Hu et al. 2025, "REINFORCE++: Stabilizing Critic-Free Policy
Optimization with Global Normalization" (arXiv 2501.03262, v9; v1 by Hu alone was titled
"REINFORCE++: A Simple and Efficient Approach for Aligning Large Language Models"). Reference
implementation: verl 0.9.1 `adv_estimator=reinforce_plus_plus_baseline`
(`compute_reinforce_plus_plus_baseline_outcome_advantage`); also OpenRLHF.

The "w/ Baseline" variant for k > 1 samples per prompt (§3.2): subtract the group-mean reward
(Eq. 6), then normalise over the whole batch rather than per prompt (Eq. 7), with the PPO
clipped objective (Eq. 1, ε 0.2) and a separate k2 KL loss (Eq. 8). verl implements Eq. 7 as
`masked_whiten` over the batch's completion tokens (each completion's value repeated over its
tokens): ablate's scale="token_whiten". The paper's sections and equations were read through a
secondary, source-checked summary; verl's code was read directly.

The weight of the k2 KL loss is not reported in the paper (v9); the preset uses verl's default
`actor.kl_loss_coef` 0.001 (actor.yaml; v1's Table 1 used β 0.001 for mathematics, as a k1
penalty in the reward)."""

import dataclasses

from ablate.baselines.grpo import ALGORITHM as GRPO

ALGORITHM = dataclasses.replace(
    GRPO,  # Eq. 6: baseline = group mean reward; Eq. 1: PPO clip ε 0.2, per-sequence token mean
    scale="token_whiten",  # Eq. 7 batch normalisation; verl: masked_whiten over batch tokens
    kl_coef=0.001,  # λ unreported (§3.2); verl actor.yaml kl_loss_coef: 0.001
    kl_estimator="k2",  # Eq. 8: J_k2 = E[½ (log π_θ/π_ref)²] (App. B.1: k2, not GRPO's k3)
    kl_in="loss",  # Eq. 8: a separate KL loss term, not a penalty in the reward
)
