"""Quickstart: the four presets on the RL-ready base (2 seeds), plus GRPO from every other rung
of the zoo ladder (1 seed) for the base-model-selection curve; Pass@G of every rung under the
training template and its mild variant first.

Every arm uses 4 mini-batches per rollout (GSPO's schedule, §5.1, and the schedule for which
lr 3e-5 was measured on the 0.53M model), so arms differ only in their other factors.
"""

from ablate.study import Budget, Cells, EvalSpec, PassKSpec, Study, arm

MATCHED = {"minibatches": 4}

STUDY = Study(
    name="quickstart",
    task="arithmetic",
    base_models=["rl_ready"],
    templates=["plain"],
    arms=[
        arm("grpo", "grpo", **MATCHED),
        arm("dr_grpo", "dr_grpo", **MATCHED),
        arm("dapo", "dapo", **MATCHED),
        arm("gspo", "gspo"),
    ],
    seeds=[0, 1],
    extra=[Cells(arms=["grpo"], base_models=["hopeless", "mid", "saturated"], seeds=[0])],
    budget=Budget(max_steps=100, prompts_per_step=8, group_size=8, max_new_tokens=80),
    eval=EvalSpec(every=50, n_samples=8, ks=(1, 8), max_problems=64),
    passk=PassKSpec(n=16, ks=(1, 4, 8, 16), max_problems=64, templates=["plain", "plain_q"]),
    checkpoint_every=20,
)
