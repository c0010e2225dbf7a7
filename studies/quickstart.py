"""Quickstart: the four presets on the RL-ready base, 3 seeds each (the fewest for which the
report gives intervals and tests), two live controls, plus GRPO from every other rung of the zoo
ladder (1 seed) for the base-model-selection curve; Pass@G of every rung under the training
template and its mild variant first.

Every arm runs the same update schedule (4 mini-batches per rollout: GSPO's §5.1, and the
schedule for which lr 3e-5 was measured on the 0.53M model) and no KL term, declared on each arm,
so arms differ only in their other factors: GRPO's preset would keep a KL of 0.04 with a
reference model, and DAPO's 16 updates per rollout.

Controls: `grpo_again` is an A/A replicate of GRPO (same data order and eval samples, rollouts of
its own) on 5 seeds: the report must find no difference. `grpo_random` is GRPO trained on random
rewards (each sample rewarded with probability 0.5, Spurious Rewards' random control): a real
loss of everything GRPO learns, which the study must be able to detect; on 5 seeds, as at 3 its
loss (Δ −0.267 [−0.542, +0.008], Holm p 0.053 in the 2026-12-03 demo) was too variable to detect.

Evaluation reads the task's whole eval split (256 problems, 2 samples each: as many samples as 64
problems × 8, spread over more of the task) at the start, every 25 steps and every 60k generated
tokens, so arms are also compared at equal generated tokens.
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
        arm("grpo_again", replicate_of="grpo"),
        arm("grpo_random", "grpo", reward_control="random", reward_control_p=0.5, **MATCHED),
    ],
    seeds=[0, 1, 2],
    extra=[
        Cells(arms=["grpo", "grpo_again", "grpo_random"], seeds=[3, 4]),
        Cells(arms=["grpo"], base_models=["hopeless", "mid", "saturated"], seeds=[0]),
    ],
    budget=Budget(max_steps=50, prompts_per_step=8, group_size=8, max_new_tokens=80),
    eval=EvalSpec(every=25, every_tokens=60_000, n_samples=2, ks=(1, 2)),
    passk=PassKSpec(n=16, ks=(1, 4, 8, 16), max_problems=64, templates=["plain", "plain_q"]),
    effect_of_interest=0.03,
    equivalence_margin=0.03,
    positive_control="grpo_random",
    checkpoint_every=25,
)
