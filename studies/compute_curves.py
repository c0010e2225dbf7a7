"""Compute–performance curves (ScaleRL, arXiv 2510.13786 §2 and App. A): GRPO, Dr. GRPO and DAPO
on the RL-ready base, 3 seeds each, every arm given the same generated-token budget (6M tokens,
dynamic sampling's discarded samples included: about 2,800 GRPO steps), and evaluated at the
same compute: on a log-spaced cadence (4 marks per decade from 20k generated tokens) and every
500k tokens, so every arm has points at the same x and the second half of the compute holds
enough points for the forecast check. Measured on the way (GRPO, lr 3e-5): at 3M tokens the
curves had passed their midpoint (C_mid 1.1M–2.3M) but two seeds of three had not levelled off
(their best A was the bound 1: no fit); lr 1e-4 and 2e-4 collapse pass@1 (0.52 → 0.23 and 0.00
in 400 steps), so the budget, not the step size, is what bends the curve.

The report fits ScaleRL's sigmoid per arm and seed after a warm-up of 50k generated tokens
(about 20 steps: Adam's first steps), gives A, B and C_mid with seed intervals, the power law
beside it, the fit-window sensitivity, a first-half forecast check, the comparison rule (A
first; within the noise, a shared A and B) and the compute to reach pass@1 = 0.7.

Every arm runs the same update schedule (4 mini-batches per rollout) and no KL, declared on each
arm, as in the quickstart.
"""

from ablate import Budget, CurveSpec, EvalSpec, Study, arm

MATCHED = {"minibatches": 4, "kl_coef": 0.0}

STUDY = Study(
    name="compute_curves",
    task="arithmetic",
    base_models=["rl_ready"],
    templates=["plain"],
    arms=[
        arm("grpo", "grpo", **MATCHED),
        arm("dr_grpo", "dr_grpo", **MATCHED),
        arm("dapo", "dapo", **MATCHED),
    ],
    seeds=[0, 1, 2],
    budget=Budget(
        max_steps=8000,
        max_generated_tokens=6_000_000,
        prompts_per_step=8,
        group_size=8,
        max_new_tokens=80,
    ),
    eval=EvalSpec(
        every_tokens=500_000,
        log_from=20_000,
        log_per_decade=4,
        n_samples=4,
        ks=(1, 4),
    ),
    passk=None,
    curves=CurveSpec(axis="generated_tokens", warmup=50_000, target=0.7),
    checkpoint_every=100,
)
