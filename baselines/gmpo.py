"""GMPO — Zhao et al. 2025, "Geometric-Mean Policy Optimization" (arXiv 2507.20673).
Reference implementation: github.com/callsys/GMPO (`train_zero_math_gmpo.py`,
`scripts/qwen2.5-math-7b-gmpo.sh`, on the oat / understand-r1-zero code); verl `geo_mean`.

GMPO optimises the geometric mean of the token-level ratios instead of their arithmetic mean:
per sequence, each token's log-ratio is clipped in log space (on the side the advantage's sign
makes pessimistic), the clipped log-ratios are averaged, and exp of that mean times the
advantage is the sequence's objective; sequences are averaged. The clip range is (e^-0.4,
e^0.4) on the ratio, i.e. ±0.4 on the log-ratio (the script's CLIPRANGE=0.4; the paper's range,
per a secondary summary, is the same).

Not set: the script's flags (128 prompts x 8 samples per rollout, train_batch_size 128) imply
several optimizer steps per rollout, which was not traced through oat; like
`baselines/dr_grpo.py` (same code base), the preset keeps one update per rollout."""

import dataclasses

from ablate.baselines.grpo import ALGORITHM as GRPO

ALGORITHM = dataclasses.replace(
    GRPO,  # script: --critic_type grpo (group-std advantages), one sequence mean of losses
    surrogate="gmpo",  # geometric mean of the clipped token ratios, one loss per sequence
    clip_low=0.4,  # script: CLIPRANGE=0.4, the log-ratio clipped at -0.4 (ratio e^-0.4)
    clip_high=0.4,  # script: CLIPRANGE=0.4, the log-ratio clipped at +0.4 (ratio e^0.4)
    kl_coef=0.0,  # script: --beta 0 (no reference model)
)
