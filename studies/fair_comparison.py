"""Fair comparison: the quickstart's GRPO vs Dr. GRPO contrast on the RL-ready base (same budget,
schedule, seeds and eval: 50 steps of 8 prompts × 8 samples, 5 seeds, the whole 256-problem eval
split × 2 samples), but each arm tuned at an equal budget first: its learning rate, 6 TPE trials
(sampler seed 0) × 1 seed × 25 steps, scored on 64 selection problems held out of the train
split (never the eval split). Every final checkpoint is then re-evaluated under 8 eval recipes
(template plain / plain_q × temperature 1 / 0.6 × 2 decode seeds). Its twin
`fair_comparison_untuned.py` runs the same arms at the quickstart's shared lr 3e-5: the two
reports say whether the quickstart's verdict survives a fair tuning budget and a change of eval
recipe.

`ablate run studies/fair_comparison.py --workers 2 && ablate run
studies/fair_comparison_untuned.py --workers 2` (the README gives their wall times).
"""

from ablate.study import Budget, EvalSpec, Recipes, Study, TuneSpec, arm, log_range

MATCHED = {"minibatches": 4, "kl_coef": 0.0}

STUDY = Study(
    name="fair_comparison",
    task="arithmetic",
    base_models=["rl_ready"],
    templates=["plain"],
    arms=[arm("grpo", "grpo", **MATCHED), arm("dr_grpo", "dr_grpo", **MATCHED)],
    seeds=[0, 1, 2, 3, 4],
    budget=Budget(max_steps=50, prompts_per_step=8, group_size=8, max_new_tokens=80),
    eval=EvalSpec(
        at_start=False,
        n_samples=2,
        ks=(1, 2),
        robustness=Recipes(decode_seeds=2, templates=("plain_q",), temperatures=(0.6,)),
    ),
    passk=None,
    tune=TuneSpec(
        params={"lr": log_range(1e-6, 1e-4)},
        trials=6,
        steps=25,
        seeds=(100,),
        selection_problems=64,
        sampler_seed=0,
    ),
    effect_of_interest=0.03,
    equivalence_margin=0.03,
    checkpoint_every=0,
)
