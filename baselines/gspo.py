"""GSPO — Zheng et al. 2025, "Group Sequence Policy Optimization" (arXiv 2507.18071 v2)."""

import dataclasses

from ablate.baselines.grpo import ALGORITHM as GRPO

ALGORITHM = dataclasses.replace(
    GRPO,
    ratio_level="sequence",  # §4: s_i = (pi_theta(o_i|q) / pi_old(o_i|q))^(1/|o_i|)
    clip_low=3e-4,  # §5.1: left clipping range 3e-4
    clip_high=4e-4,  # §5.1: right clipping range 4e-4
    kl_coef=0.0,  # §5.1 trains without KL; the first author recommends KL off (verl PR #2775)
    minibatches=4,  # §5.1: each rollout batch is split into 4 mini-batches for gradient updates
)
