"""Base-model selection (claim 4 of `ablate.report.claims`): GRPO from every rung of the zoo
ladder, under the training template and its mild variant, 3 seeds. RL gain against base Pass@G
answers "RL amplifies what the base model already samples"."""

from ablate.study import Budget, EvalSpec, PassKSpec, Study, arm

STUDY = Study(
    name="base_model_selection",
    task="arithmetic",
    base_models=["hopeless", "mid", "rl_ready", "saturated"],
    templates=["plain", "plain_q"],
    arms=[arm("grpo", "grpo", minibatches=4)],  # 4 updates per rollout: lr 3e-5 measured there
    seeds=[0, 1, 2],
    budget=Budget(max_steps=150, prompts_per_step=8, group_size=8, max_new_tokens=80),
    eval=EvalSpec(every=50, n_samples=8, ks=(1, 8)),
    passk=PassKSpec(
        n=16, ks=(1, 4, 8, 16), max_problems=64, templates=["plain", "plain_q", "plain_spaced"]
    ),
)
