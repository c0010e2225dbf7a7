"""Reward controls on the RL-ready base: GRPO on the verifier's reward beside GRPO on each of
Spurious Rewards' controls (arXiv 2506.10947 §2) — random (p = 0.5), incorrect label, majority
vote (TTRL's label: the group's most frequent answer) and format only — 3 seeds each.

What it separates: a control that trains on no information about correctness (random, format)
and still moves pass@1 measures what RL elicits whatever the reward; majority vote is the
label-free reference that "true − random" should be read beside. Every control's draws are
seeded per (seed, step, attempt, sample), so the arms share data order, eval samples and, for
the random control, one set of coin flips per seed.

The same matched schedule as the quickstart (4 mini-batches per rollout, no KL), so the arms
differ in the reward only. Evaluation reads the whole eval split (256 problems, 2 samples) at the
start, every 20 steps and at the end.

Every gain is also read against the best-elicited base (issue 33): the base model under the best
of 3 templates × 0/1 worked examples × temperature 1.0/0.6 × strict/lenient parse, chosen on 64
train problems and measured on the eval problems. The controls' gains over *that* base say how
much of each one a better prompt, temperature or parser alone would have given.
"""

from ablate.study import Budget, ElicitSpec, EvalSpec, PassKSpec, Study, arm

MATCHED = {"minibatches": 4, "kl_coef": 0.0}

STUDY = Study(
    name="reward_controls",
    task="arithmetic",
    base_models=["rl_ready"],
    templates=["plain"],
    arms=[
        arm("grpo", "grpo", **MATCHED),
        arm("grpo_random", "grpo", reward_control="random", reward_control_p=0.5, **MATCHED),
        arm("grpo_incorrect", "grpo", reward_control="incorrect", **MATCHED),
        arm("grpo_majority", "grpo", reward_control="majority_vote", **MATCHED),
        arm("grpo_format", "grpo", reward_control="format_only", **MATCHED),
    ],
    seeds=[0, 1, 2],
    budget=Budget(max_steps=40, prompts_per_step=8, group_size=8, max_new_tokens=80),
    eval=EvalSpec(every=20, n_samples=2, ks=(1, 2)),
    passk=PassKSpec(
        elicit=ElicitSpec(
            templates=["plain", "plain_q", "none"],
            shots=(0, 1),
            temperatures=(0.6,),
            parses=("strict", "lenient"),
        )
    ),
    effect_of_interest=0.03,
    equivalence_margin=0.03,
)
