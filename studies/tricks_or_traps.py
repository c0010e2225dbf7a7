""" "Tricks or Traps? A Deep Dive into RL for LLM Reasoning" (Liu et al. 2025, arXiv 2508.08221)
reproduced on the zoo as tested claims: its findings depend on the base model (base vs aligned)
and the data (easy vs hard), so the arms run on the RL-ready rung and the aligned rung
(`ablate zoo show aligned`), on easy and hard problems (the arithmetic subsets the RL-ready rung
solves in >= 7/8 and <= 1/8 samples: `python -m devtools arithmetic-subsets`).

Five study files share the arms and the paper's findings below (each study declares the
findings it tests); `make tricks` runs them all and writes the reproduction's claims table
(`ablate report studies/tricks_or_traps*.py --out reports/tricks_or_traps`):

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
from ablate.factors.finding import Finding
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

#: Δ pass@1 inside which two arms count as equivalent (TOST on the 90% interval), for a finding
#: of no effect and for the directional ones alike: a quarter of the base rung's RL gain here.
#: Declared before the results as each study's `equivalence_margin`.
NO_EFFECT_MARGIN = 0.03


#: The paper's findings in its order: the statement (paper's words), what ablate tests, the
#: study and rung, the two arms (they differ in the finding's factor only), the predicted sign
#: of arm − reference (0: no effect, within ±NO_EFFECT_MARGIN) and the metric that should
#: explain it. The paper reports no seeds or intervals: its column gives its own words and,
#: where it prints one, its number.
FINDINGS = (
    Finding(
        id="std_easy",
        paper="Takeaway 2: remove the std when rewards are concentrated (easy data)",
        statement="no std − group std, pass@1, easy data, base rung: > 0",
        study="tricks_or_traps", model="rl_ready", arm="no_std", reference="grpo4",
        direction=+1, mechanism="policy/grad_norm",
    ),
    Finding(
        id="std_hard",
        paper="Takeaway 2: on harder data the std normalisation stays useful",
        statement="no std − group std, pass@1, hard data, base rung: < 0",
        study="tricks_or_traps_hard", model="rl_ready", arm="no_std", reference="grpo4",
        direction=-1, mechanism="policy/grad_norm",
    ),
    Finding(
        id="batch_std_easy",
        paper="Takeaway 3: group mean + batch std is the most robust normalisation",
        statement="batch std − group std, pass@1, easy data, base rung: > 0",
        study="tricks_or_traps", model="rl_ready", arm="batch_std", reference="grpo4",
        direction=+1, mechanism="policy/grad_norm",
    ),
    Finding(
        id="batch_std_hard",
        paper="Takeaway 3: group mean + batch std is the most robust normalisation",
        statement="batch std − group std, pass@1, hard data, base rung: > 0",
        study="tricks_or_traps_hard", model="rl_ready", arm="batch_std", reference="grpo4",
        direction=+1, mechanism="policy/grad_norm",
    ),
    Finding(
        id="clip_higher_aligned",
        paper="Takeaway 4: clip-higher helps aligned models (slows entropy collapse)",
        statement="clip_high 0.28 − 0.2, pass@1, aligned rung: > 0",
        study="tricks_or_traps", model="aligned", arm="clip_higher", reference="grpo4",
        direction=+1, mechanism="policy/clip_frac_high",
    ),
    Finding(
        id="clip_higher_base",
        paper="Takeaway 4: on base models clip-higher has little effect (upper clip rate ≈ 0.003)",
        statement="clip_high 0.28 − 0.2, pass@1, base rung: within ±0.03",
        study="tricks_or_traps", model="rl_ready", arm="clip_higher", reference="grpo4",
        direction=0, mechanism="policy/clip_frac_high",
        margin=NO_EFFECT_MARGIN,
    ),
    Finding(
        id="token_agg_base",
        paper="Takeaway 7: token-level loss aggregation is better for base models",
        statement="token mean − sequence mean, pass@1, base rung: > 0",
        study="tricks_or_traps", model="rl_ready", arm="token_agg", reference="grpo4",
        direction=+1, mechanism="length/incorrect_mean",
    ),
    Finding(
        id="token_agg_aligned",
        paper="Takeaway 7: sequence-level aggregation is better for aligned models",
        statement="token mean − sequence mean, pass@1, aligned rung: < 0",
        study="tricks_or_traps", model="aligned", arm="token_agg", reference="grpo4",
        direction=-1, mechanism="length/incorrect_mean",
    ),
    Finding(
        id="overlong_short",
        paper="Takeaway 8: overlong filtering helps at a short maximum length (8k)",
        statement="filter − none, pass@1, 40 new tokens: > 0",
        study="tricks_or_traps_short", model="rl_ready", arm="overlong_filter", reference="grpo4",
        direction=+1, mechanism="length/truncation_rate",
    ),
    Finding(
        id="overlong_long",
        paper="Takeaway 8: ... and little at a long one (20k)",
        statement="filter − none, pass@1, 80 new tokens: within ±0.03",
        study="tricks_or_traps_long", model="rl_ready", arm="overlong_filter", reference="grpo4",
        direction=0, mechanism="length/truncation_rate",
        margin=NO_EFFECT_MARGIN,
    ),
    Finding(
        id="lite_ppo_vs_grpo",
        paper="§5: Lite PPO (group-mean/batch-std, token-level) beats GRPO (base models, Fig. 15)",
        statement="Lite PPO − GRPO, pass@1, easy data, base rung: > 0",
        study="tricks_or_traps", model="rl_ready", arm="lite_ppo", reference="grpo4",
        direction=+1, mechanism="policy/entropy",
    ),
    Finding(
        id="lite_ppo_vs_dapo",
        paper="§5: Lite PPO beats DAPO (base models, Fig. 15)",
        statement="Lite PPO − DAPO, pass@1, easy data, base rung: > 0",
        study="tricks_or_traps", model="rl_ready", arm="lite_ppo", reference="dapo4",
        direction=+1, mechanism="policy/entropy",
    ),
    Finding(
        id="lite_ppo_vs_grpo_hard",
        paper="§5: Lite PPO beats GRPO on hard data too (Qwen3-8B hard: 66.96 vs DAPO 64.17)",
        statement="Lite PPO − GRPO, pass@1, hard data, base rung: > 0",
        study="tricks_or_traps_hard", model="rl_ready", arm="lite_ppo", reference="grpo4",
        direction=+1, mechanism="policy/entropy",
    ),
    Finding(
        id="length_bias",
        paper="Dr. GRPO §3.1 (revisited): GRPO's 1/|o| lets incorrect answers grow longer",
        statement="GRPO − Dr. GRPO, length of incorrect training samples, last quarter: > 0",
        study="tricks_or_traps_length", model="tail_ready", arm="grpo4", reference="dr_grpo4",
        direction=+1, mechanism="length/self_check_rate_incorrect",
        measure="length/incorrect_mean",
    ),
)  # fmt: skip


def tricks_study(name: str, arms: list[str], **settings) -> Study:
    """One study of the reproduction: the shared arms, seeds, budget and evaluation, and the
    paper's findings that name it."""
    defaults = {
        "task": "arithmetic",
        "base_models": ["rl_ready"],
        "reference": "grpo4",
        "seeds": SEEDS,
        "budget": Budget(max_steps=40, prompts_per_step=8, group_size=8, max_new_tokens=80),
        # the start is the base model's Pass@G phase (same weights for every arm)
        "eval": EvalSpec(n_samples=2, ks=(1, 2), at_start=False),
        "passk": PassKSpec(n=8, ks=(1, 8), max_problems=64),
        "equivalence_margin": NO_EFFECT_MARGIN,
    }
    defaults["findings"] = [f for f in FINDINGS if f.study == name]
    return Study(name=name, arms=[ARMS[a] for a in arms], **{**defaults, **settings})


STUDY = tricks_study(
    "tricks_or_traps",
    BASE_ARMS,
    task_options=EASY,
    extra=[Cells(arms=ALIGNED_ARMS, base_models=["aligned"])],
)
