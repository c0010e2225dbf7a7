"""Quickstart: the four presets on the RL-ready base, 3 seeds each (the fewest for which the
report gives intervals and tests), plus GRPO from every other rung of the zoo ladder (1 seed) for
the base-model-selection curve; Pass@G of every rung under the training template and its mild
variant first.

Every arm runs the same update schedule (4 mini-batches per rollout: GSPO's §5.1, and the
schedule for which lr 3e-5 was measured on the 0.53M model) and no KL term, declared on each arm,
so arms differ only in their other factors: GRPO's preset would keep a KL of 0.04 with a
reference model, and DAPO's 16 updates per rollout. Evaluation runs every 20 steps and on a token
cadence, so arms are also compared at equal generated tokens.
"""

from ablate.study import Budget, Cells, EvalSpec, PassKSpec, Study, arm

MATCHED = {"minibatches": 4, "kl_coef": 0.0}

STUDY = Study(
    name="quickstart",
    task="arithmetic",
    base_models=["rl_ready"],
    templates=["plain"],
    arms=[
        arm("grpo", "grpo", **MATCHED),
        arm("dr_grpo", "dr_grpo", **MATCHED),
        arm("dapo", "dapo", **MATCHED),
        arm("gspo", "gspo", **MATCHED),
    ],
    seeds=[0, 1, 2],
    extra=[Cells(arms=["grpo"], base_models=["hopeless", "mid", "saturated"], seeds=[0])],
    budget=Budget(max_steps=80, prompts_per_step=8, group_size=8, max_new_tokens=80),
    eval=EvalSpec(every=20, every_tokens=40_000, n_samples=2, ks=(1, 2)),
    passk=PassKSpec(n=16, ks=(1, 4, 8, 16), max_problems=64, templates=["plain", "plain_q"]),
    effect_of_interest=0.03,
    checkpoint_every=20,
)
