"""The claims of `ablate.report.claims` as tested statements: the arms and budgets each claim
needs, 3 seeds.

- Claim 4, base model: GRPO from every rung (gain vs base Pass@G; cells with no signal flagged).
- Claim 5, template: GRPO from the RL-ready rung under the mild template variant `plain_q`.
- Claim 1b, Dr. GRPO length bias (Liu et al. 2025, §3.1): GRPO vs Dr. GRPO, length of
  incorrect answers over training.
- Claim 2, clip-higher keeps entropy up (Yu et al. 2025, DAPO §3.1): with off-policy pressure
  (2 epochs x 4 mini-batches) the upper clip must bind on a few % of tokens
  (`claims.arms.CLIP_BINDS_MIN`) before the arms can differ; on-policy, the ratio is 1 and no
  clip binds.
- Claim 3, GSPO (Zheng et al. 2025, §3): token- vs sequence-ratio variance against completion
  length.
- Dynamic sampling (Yu et al. 2025, DAPO §3.2): gain per step vs extra generation spent.
All arms share 4 mini-batches per rollout so the schedule is not a confound."""

from ablate.study import Budget, Cells, EvalSpec, PassKSpec, Study, arm

MATCHED = {"minibatches": 4, "kl_coef": 0.0}
PRESSURE = {"minibatches": 4, "ppo_epochs": 2, "kl_coef": 0.0}

STUDY = Study(
    name="seed_claims",
    task="arithmetic",
    base_models=["rl_ready"],
    templates=["plain"],
    arms=[
        arm("grpo", "grpo", **MATCHED),
        arm("dr_grpo", "dr_grpo", **MATCHED),
        arm("gspo", "gspo", **MATCHED),
        arm("grpo_dynamic", "grpo", dynamic_sampling=True, **MATCHED),
        arm("grpo_2ep", "grpo", **PRESSURE),
        arm("grpo_2ep_clip_higher", "grpo", clip_high=0.28, **PRESSURE),
    ],
    reference="grpo",
    seeds=[0, 1, 2],
    extra=[
        Cells(arms=["grpo"], base_models=["hopeless", "mid", "saturated"]),
        Cells(arms=["grpo"], templates=["plain_q"]),
    ],
    budget=Budget(max_steps=200, prompts_per_step=8, group_size=8, max_new_tokens=80),
    eval=EvalSpec(every=50, n_samples=8, ks=(1, 8)),
    passk=PassKSpec(n=16, ks=(1, 4, 8, 16), max_problems=64, templates=["plain", "plain_q"]),
)
