"""Quickstart: the four presets on the RL-ready base, 5 seeds each, three live controls on the
same 5 seeds, plus GRPO from every other rung of the zoo ladder (1 seed) for the
base-model-selection curve; Pass@G of every rung under the training template and its mild
variant first.

Every arm runs the same update schedule (4 mini-batches per rollout: GSPO's §5.1, and the
schedule for which lr 3e-5 was measured on the 0.53M model) and no KL term, declared on each arm,
so arms differ only in their other factors: GRPO's preset would keep a KL of 0.04 with a
reference model, and DAPO's 16 updates per rollout.

Controls, on the contrasts' own seeds (a control certifies the design it runs in):
- `grpo_again`: an A/A replicate of GRPO (same data order and eval samples, rollouts of its own):
  the report must find no difference.
- `grpo_random`: GRPO on random rewards (each sample rewarded with probability 0.5, Spurious
  Rewards' random control), the positive control, declared at Δ −0.25: it lost −0.267 (5 seeds,
  2026-12-03 demo) and −0.296 (6 seeds of GRPO vs it at this budget and eval, issue 42's pilot).
  Simulated from that pilot's variance components (seed SD of the difference 0.098, arm × problem
  0.11, seed × problem 0.18, per sample 0.51), the crossed test detects −0.25 at 256 problems × 2
  samples in 59% of re-runs at 3 seeds, 89% at 4 and 98% at 5 (2000 re-runs each; 80%, 90% with
  the seed SD at its 80% upper bound at 5 and 6 seeds): the contrasts, not only the control,
  run 5 seeds.
- `grpo_noisy`: the graded control, GRPO with half its rewards replaced by that coin
  (`reward_control="noisy"`, f = 0.5), declared at Δ −0.07: the pilot measured −0.073 over 6
  seeds (per seed −0.055 to −0.104). Detected at 5 seeds in 100% of simulated re-runs (97% with
  the seed SD at its bound); `ablate plan` and the report state its detection probability. (At
  f = 0.375 the loss, −0.031 over 8 seeds, is too small and variable: 30% at 5 seeds.)

Evaluation reads the task's whole eval split (256 problems, 2 samples each: as many samples as 64
problems × 8, spread over more of the task) at the start, every 25 steps and every 60k generated
tokens, so arms are also compared at equal generated tokens.
"""

from ablate.study import Budget, Cells, Control, EvalSpec, PassKSpec, Study, arm

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
        arm("grpo_noisy", "grpo", reward_control="noisy", reward_noise_fraction=0.5, **MATCHED),
    ],
    seeds=[0, 1, 2, 3, 4],
    extra=[Cells(arms=["grpo"], base_models=["hopeless", "mid", "saturated"], seeds=[0])],
    budget=Budget(max_steps=50, prompts_per_step=8, group_size=8, max_new_tokens=80),
    eval=EvalSpec(every=25, every_tokens=60_000, n_samples=2, ks=(1, 2)),
    passk=PassKSpec(n=16, ks=(1, 4, 8, 16), max_problems=64, templates=["plain", "plain_q"]),
    effect_of_interest=0.03,
    equivalence_margin=0.03,
    positive_control=Control(arm="grpo_random", effect=-0.25),
    graded_control=Control(arm="grpo_noisy", effect=-0.07),
    checkpoint_every=25,
)
