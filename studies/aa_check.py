"""A/A check: GRPO and an independent replicate of it, 5 seeds each. The two arms are the same
algorithm on independent seed streams, so any significant difference in the report is a failure
of the pipeline's statistics (the live counterpart of `python -m devtools calibrate`)."""

from ablate.study import Budget, EvalSpec, Study, arm

STUDY = Study(
    name="aa_check",
    task="arithmetic",
    base_models=["rl_ready"],
    arms=[
        arm("grpo", "grpo", minibatches=4, kl_coef=0.0),
        arm("grpo_again", replicate_of="grpo"),
    ],
    seeds=[0, 1, 2, 3, 4],
    budget=Budget(max_steps=60, prompts_per_step=8, group_size=8, max_new_tokens=80),
    eval=EvalSpec(every=20, n_samples=2, ks=(1, 2)),
    passk=None,
    checkpoint_every=20,
)
