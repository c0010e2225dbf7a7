"""Factor grid: single-factor ablations from GRPO, the progressive path GRPO → DAPO (the DAPO
paper's Table 1 for our setting) and PPO as the reference row, 3 seeds on the RL-ready rung.

The base arm uses 4 mini-batches per rollout and no KL so that clip and ratio factors can act
(with one update per rollout the ratio is always 1)."""

import dataclasses

import ablate
from ablate.study import Budget, EvalSpec, Study, arm, one_at_a_time, path

BASE = dataclasses.replace(ablate.baseline("grpo"), minibatches=4, kl_coef=0.0)

STUDY = Study(
    name="factor_grid",
    task="arithmetic",
    base_models=["rl_ready"],
    arms=one_at_a_time(
        BASE,
        scale=["none", "batch_std"],
        baseline=["leave_one_out"],
        loss_agg=["token_mean", "seq_mean_token_sum_norm"],
        clip_high=[0.28],
        dynamic_sampling=[True],
        mask_truncated=[True],
        overlong_buffer=[None],
        kl_coef=[0.04],
    )
    + path("grpo", "dapo")
    + [arm("ppo", "ppo")],  # the reference row: a learned critic instead of group baselines
    reference="custom",
    seeds=[0, 1, 2],
    budget=Budget(max_steps=150, prompts_per_step=8, group_size=8, max_new_tokens=80),
    eval=EvalSpec(every=50, n_samples=8, ks=(1, 8), max_problems=64),
)
