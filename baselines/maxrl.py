"""MaxRL — Tajwar et al. 2026, "Maximum Likelihood Reinforcement Learning" (arXiv 2602.02710).

The advantage divides the group-centred reward by the group's mean reward instead of its std:
A_i = (r_i - mean r) / (mean r + eps). With 0/1 rewards the mean is the prompt's pass rate p, and
the 1/p weight turns the policy gradient into the gradient of the log-likelihood of success
(hard prompts weigh more). Reference implementation: TRL's experimental `MaxRLConfig` (a
`GRPOConfig` whose one documented difference is this advantage, "p-normalization"), also SkyRL
and prime-rl. A group whose mean reward is 0 (all wrong) gets advantage 0.

The preset changes GRPO in the advantage scale only, as TRL's MaxRLConfig does; the paper's own
training settings (data, KL, batch) are not modelled."""

import dataclasses

from ablate.baselines.grpo import ALGORITHM as GRPO

ALGORITHM = dataclasses.replace(
    GRPO,
    scale="mean",  # MaxRL: (r - mean r) / (mean r + eps), TRL MaxRLConfig docstring
)
