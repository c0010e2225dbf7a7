"""Dr. GRPO — Liu et al. 2025, "Understanding R1-Zero-Like Training: A Critical Perspective"
(arXiv 2503.20783); reference code sail-sg/understand-r1-zero (`critic_type=drgrpo`)."""

import dataclasses

from ablate.baselines.grpo import ALGORITHM as GRPO

ALGORITHM = dataclasses.replace(
    GRPO,
    scale="none",  # §3.1 (Dr. GRPO): drop the std(R) division ("question-level difficulty
    # bias"); the code's compute_monte_carlo_advantages divides by std only for critic_type=grpo
    loss_agg="seq_mean_token_sum_norm",  # §3.1: sum token losses and divide by a constant instead
    # of |o_i| ("response-level length bias"); code: masked_sum(axis=1) / generate_max_length
    loss_norm_constant=None,  # the constant is the max generation length (3000 in App. G): None
    # resolves to the trial budget's max new tokens
    kl_coef=0.0,  # App. G, Table 6: KL coefficient 0 (no reference model)
)
