"""ScaleRL — Khatri et al. 2025, "The Art of Scaling Reinforcement Learning Compute for LLMs"
(arXiv 2510.13786). No public training code (only a curve-fitting repository, §A.5); TRL lists
a partial reproduction (loss_type="cispo", epsilon_high=5.0, scale_rewards="batch",
cast_lm_head_to_fp32=True).

The recipe (§4, the J_ScaleRL objective): the CISPO loss (§3.2 Eq. 4, sg(min(ρ, ε_max)) · Â ·
log π), prompt-level loss aggregation (1/Σ_g|y_g| over each prompt's G completions, then the
mean over prompts), batch-level advantage normalisation (Â_i = r_i - mean of the group (§2),
divided by Â_std, "the standard deviation of all advantages Â_i in a batch"; TRL's reproduction
divides by the std of the raw rewards instead, scale="batch_std"), zero-variance
filtering (0 < mean(r) < 1: flat prompts are dropped, not refilled) and No-Positive-Resampling
(pass_rate(x) < 0.9). The base algorithm is GRPO "without any KL regularization term" (§2).

Not modelled: PipelineRL-8 asynchrony (§3.1; trainers up to 8 steps ahead of generators, each
batch of 48 prompts x 16 completions is one gradient step, §A.3: here one synchronous update per
rollout), FP32 LM head (§3.2), forced length interruptions (§2, §A.10), ±1 rewards (§A.3; the
batch-level normalisation makes the advantage invariant to the reward scale), AdamW eps 1e-15
and lr 5e-7 (§A.3)."""

import dataclasses

from ablate.baselines.grpo import ALGORITHM as GRPO

ALGORITHM = dataclasses.replace(
    GRPO,  # §2: Â_i = r_i - mean(group); token-level IS ratios
    scale="batch_centred_std",  # §4: Â_norm = Â_i / Â_std, std of all Â_i in the batch
    surrogate="cispo",  # §3.2 Eq. 4 and §4: truncated-IS REINFORCE (CISPO)
    clip_low=1.0,  # §A.17.2: "keeping the lower clipping ratio fixed at 0": no lower bound
    clip_high=4.0,  # ρ capped at ε_max = 5 = 1 + 4: §A.17 finds {4, 5, 8} alike; TRL uses 5.0
    loss_agg="prompt_mean",  # §3.2 Loss Aggregation: prompt average (best A, Fig. 14a); §4
    kl_coef=0.0,  # §2: base algorithm "without any KL regularization term"
    zero_variance_filter=True,  # §3.2 Zero-Variance Filtering (Fig. 6a); §4: 0 < mean(r) < 1
    retire_pass_rate=0.9,  # §3.2 No-Positive-Resampling: retire prompts at pass rate >= 0.9
)
