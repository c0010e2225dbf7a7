""" "Tricks or Traps? A Deep Dive into RL for LLM Reasoning" (Liu et al. 2025, arXiv 2508.08221)
reproduced on the zoo as tested claims: its findings depend on the base model (base vs aligned)
and the data (easy vs hard), so the arms run on the RL-ready rung and the aligned rung
(`ablate zoo show aligned`), on easy and hard problems (the arithmetic subsets the RL-ready rung
solves in >= 7/8 and <= 1/8 samples: `python -m devtools arithmetic-subsets`).

Five study files share the arms below; `make tricks` runs them all and writes the claims table
(`tools/tricks_report.py`, findings in `ablate/report/tricks.py`):

- this file: easy data, both rungs (std, batch std, clip-higher, aggregation, Lite PPO, DAPO);
- `tricks_or_traps_hard.py`: hard data, the RL-ready rung (std, batch std, Lite PPO, DAPO);
- `tricks_or_traps_short.py` / `_long.py`: overlong filtering at 40 and 80 new tokens;
- `tricks_or_traps_length.py`: the Dr. GRPO length bias on the 'tail' layout's rung.

Every arm shares one update schedule (4 mini-batches per rollout, one epoch) and no KL: the
paper's arms differ in one technique at a time, and the DAPO and Lite PPO recipes are run on this
schedule so that only their techniques differ. 5 seeds: the power `python -m devtools calibrate`
reports (minimum detectable Δ pass@1 ≈ 0.08 at 80% power with 4 contrasts)."""

import dataclasses

import ablate
from ablate.study import Budget, Cells, EvalSpec, PassKSpec, Study, arm

MATCHED = {"minibatches": 4, "kl_coef": 0.0}
GRPO4 = dataclasses.replace(ablate.baseline("grpo"), **MATCHED)
SEEDS = [0, 1, 2, 3, 4]
EASY = {"subset": "easy", "n_eval": 2000}
HARD = {"subset": "hard", "n_eval": 2000}

ARMS = {
    "grpo4": arm("grpo4", GRPO4),
    # Takeaway 2: group-mean without the std (Dr. GRPO's scale), vs with it
    "no_std": arm("no_std", GRPO4, scale="none"),
    # Takeaway 3: group mean, batch std
    "batch_std": arm("batch_std", GRPO4, scale="batch_std"),
    # Takeaways 4-6: clip-higher at DAPO's 0.28
    "clip_higher": arm("clip_higher", GRPO4, clip_high=0.28),
    # Takeaway 7: token-level instead of sequence-level aggregation
    "token_agg": arm("token_agg", GRPO4, loss_agg="token_mean"),
    # Takeaway 8: overlong filtering
    "overlong_filter": arm("overlong_filter", GRPO4, mask_truncated=True),
    # Lite PPO (§5) and DAPO, on the shared schedule
    "lite_ppo": arm("lite_ppo", "lite_ppo", **MATCHED),
    "dapo4": arm("dapo4", "dapo", **MATCHED),
    # the length-bias revisit (tutorial §5, Dr. GRPO §3.1)
    "dr_grpo4": arm("dr_grpo4", "dr_grpo", **MATCHED),
}
BASE_ARMS = ["grpo4", "no_std", "batch_std", "clip_higher", "token_agg", "lite_ppo", "dapo4"]
ALIGNED_ARMS = ["grpo4", "clip_higher", "token_agg"]


def tricks_study(name: str, arms: list[str], **settings) -> Study:
    """One study of the reproduction: the shared arms, seeds, budget and evaluation."""
    defaults = {
        "task": "arithmetic",
        "base_models": ["rl_ready"],
        "reference": "grpo4",
        "seeds": SEEDS,
        "budget": Budget(max_steps=40, prompts_per_step=8, group_size=8, max_new_tokens=80),
        # the start is the base model's Pass@G phase (same weights for every arm)
        "eval": EvalSpec(n_samples=8, ks=(1, 8), max_problems=64, at_start=False),
        "passk": PassKSpec(n=8, ks=(1, 8), max_problems=64),
    }
    return Study(name=name, arms=[ARMS[a] for a in arms], **{**defaults, **settings})


STUDY = tricks_study(
    "tricks_or_traps",
    BASE_ARMS,
    task_options=EASY,
    extra=[Cells(arms=ALIGNED_ARMS, base_models=["aligned"])],
)
