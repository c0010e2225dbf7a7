"""Fair comparison: GRPO against Dr. GRPO on the RL-ready base, each arm tuned at an equal budget
(learning rate, 4 TPE trials × 1 seed × 10 steps on 32 selection problems held out of the train
split, the same for both arms), then 3 seeds at each arm's chosen rate; every final checkpoint
re-evaluated under 8 eval recipes (template plain / plain_q × temperature 1 / 0.6 × 2 decode
seeds). Its twin `fair_comparison_untuned.py` runs the same arms at the shared lr 3e-5: the two
reports say whether the verdict survives tuning and a change of eval recipe.

Sized for a 2-core CPU in about 20 minutes (1 torch thread per trial):
`ablate run studies/fair_comparison.py && ablate report studies/fair_comparison.py`.
"""

from ablate.study import Budget, EvalSpec, Recipes, Study, TuneSpec, arm, log_range

MATCHED = {"minibatches": 4, "kl_coef": 0.0}

STUDY = Study(
    name="fair_comparison",
    task="arithmetic",
    base_models=["rl_ready"],
    templates=["plain"],
    arms=[arm("grpo", "grpo", **MATCHED), arm("dr_grpo", "dr_grpo", **MATCHED)],
    seeds=[0, 1, 2],
    budget=Budget(max_steps=20, prompts_per_step=4, group_size=4, max_new_tokens=64),
    eval=EvalSpec(
        at_start=False,
        max_problems=64,
        n_samples=2,
        ks=(1, 2),
        robustness=Recipes(decode_seeds=2, templates=("plain_q",), temperatures=(0.6,)),
    ),
    passk=None,
    tune=TuneSpec(
        params={"lr": log_range(1e-6, 1e-4)},
        trials=4,
        steps=10,
        seeds=(100,),
        selection_problems=32,
        sampler_seed=0,
    ),
    effect_of_interest=0.05,
    equivalence_margin=0.05,
    checkpoint_every=0,
)
