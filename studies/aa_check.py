"""Live controls: GRPO, an A/A replicate of it, and GRPO on random rewards, 5 seeds each.

The replicate is the same algorithm on the same data order and eval samples with rollouts of its
own, so a *different* verdict is a failure of the pipeline's statistics (the live counterpart of
`python -m devtools calibrate`). The random-reward arm (each sample rewarded with probability 0.5,
Spurious Rewards' control) loses what GRPO learns: a real effect the study must detect, or it
is underpowered."""

from ablate.study import Budget, EvalSpec, Study, arm

STUDY = Study(
    name="aa_check",
    task="arithmetic",
    base_models=["rl_ready"],
    arms=[
        arm("grpo", "grpo", minibatches=4, kl_coef=0.0),
        arm("grpo_again", replicate_of="grpo"),
        arm(
            "grpo_random",
            "grpo",
            minibatches=4,
            kl_coef=0.0,
            reward_control="random",
            reward_control_p=0.5,
        ),
    ],
    positive_control="grpo_random",
    equivalence_margin=0.03,
    seeds=[0, 1, 2, 3, 4],
    budget=Budget(max_steps=60, prompts_per_step=8, group_size=8, max_new_tokens=80),
    eval=EvalSpec(every=20, n_samples=2, ks=(1, 2)),
    passk=None,
    checkpoint_every=20,
)
