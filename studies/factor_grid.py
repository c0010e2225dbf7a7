"""Factor grid: single-factor ablations from a schedule-matched GRPO, the progressive path from
it to DAPO (the DAPO paper's Table 1 for our setting) and PPO as the reference row, 3 seeds on the
RL-ready rung.

Every arm runs the same update schedule (4 mini-batches per rollout, one epoch) and no KL, so
clip and ratio factors can act (with one update per rollout the ratio is always 1) and no step of
the path is credited with an off-policy effect: the path ends at DAPO with its four techniques
but this schedule (`dapo4`), not DAPO's 16 updates per rollout. PPO keeps the same schedule and no
KL so that its row isolates the learned critic. The 2025 presets (CISPO, SAPO, GMPO, Clip-Cov,
KL-Cov, RLOO, REINFORCE++ with baseline, Lite PPO, ScaleRL) run as whole recipes on the same
schedule and without KL: each row is the preset against grpo4 in every field it changes."""

import dataclasses

import ablate
from ablate.study import Budget, EvalSpec, Study, arm, one_at_a_time, path

MATCHED = {"minibatches": 4, "kl_coef": 0.0}
BASE = dataclasses.replace(ablate.baseline("grpo"), **MATCHED)
DAPO = dataclasses.replace(ablate.baseline("dapo"), **MATCHED)
# the presets added with the 2025-26 factor fields (baselines/), each on the matched schedule
PRESETS_2025 = (
    "cispo",
    "sapo",
    "gmpo",
    "clip_cov",
    "kl_cov",
    "rloo",
    "reinforce_pp",
    "lite_ppo",
    "scalerl",
)

STUDY = Study(
    name="factor_grid",
    task="arithmetic",
    base_models=["rl_ready"],
    arms=one_at_a_time(
        BASE,
        base_name="grpo4",
        scale=["none", "batch_std"],
        baseline=["leave_one_out"],
        loss_agg=["token_mean", "seq_mean_token_sum_norm"],
        dynamic_sampling=[True],
        mask_truncated=[True],
        overlong_buffer=["20%"],
        kl_coef=[0.04],
    )
    # clip_high alone is the path's first step
    + path(BASE, DAPO, start_name="grpo4", end_name="dapo4")
    # the reference row: a learned critic instead of group baselines, on the same schedule
    + [arm("ppo", "ppo", ppo_epochs=1, **MATCHED)]
    # published recipes as whole arms, on the same schedule and without KL
    + [arm(name, name, **MATCHED) for name in PRESETS_2025],
    reference="grpo4",
    seeds=[0, 1, 2],
    budget=Budget(max_steps=150, prompts_per_step=8, group_size=8, max_new_tokens=80),
    eval=EvalSpec(every=25, n_samples=2, ks=(1, 2)),
)
