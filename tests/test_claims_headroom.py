"""Claim 6 as one estimand: the real-reward RL arms of the main cell, complete seeds, k >= 8 from
>= 2k samples, gains as shares of the base's headroom, through the crossed contrast."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from ablate.factors.algorithms import Algorithm
from ablate.report.claims import estimand, headroom, rules
from ablate.report.claims.headroom import claim_rl_raises_pass_at_1_more_than_pass_at_k as claim6
from ablate.testing import study_data

GRPO4 = Algorithm(minibatches=4, kl_coef=0.0)
ALGOS = {
    "grpo": GRPO4,
    "dr_grpo": dataclasses.replace(GRPO4, scale="none"),
    "grpo_again": GRPO4,  # the A/A replicate
    "grpo_random": dataclasses.replace(GRPO4, reward_control="random"),  # the positive control
    "grpo_format": dataclasses.replace(GRPO4, reward_control="format_only"),
}
RL = ("grpo", "dr_grpo")
#: the base model's correct samples of 16 on each of 64 problems (pass@1 0.19, pass@8 0.64)
BASE = [8, 4, 2, 1, 0, 0, 6, 3] * 8


def judged(claim: rules.Claim) -> rules.Claim:
    return rules.adjudicate([claim])[0]


def _rows(trials: pd.DataFrame, step: int, counts: dict, samples: int) -> list[dict]:
    rows = []
    for t in trials.itertuples():
        for j, c in enumerate(counts[(t.arm, t.seed)]):
            for k in range(samples):
                rows.append(
                    dict(trial_id=t.trial_id, arm=t.arm, model=t.model, template=t.template,
                         seed=t.seed, step=step, problem_id=f"p{j}", sample=k, correct=k < c,
                         length=10, truncated=False)
                )  # fmt: skip
    return rows


def study(final, seeds=6, arms=tuple(ALGOS), samples=16, ks=(1, 8), base=BASE, skip=()):
    """Trials of `arms` × `seeds` (minus `skip`, (arm, seed) pairs), step-0 eval `base` and final
    eval `final(arm, seed)` correct counts of `samples` per problem; ks logged."""
    cells = [(a, s) for a in arms for s in range(seeds) if (a, s) not in skip]
    curves = {f"eval/pass_at_{k}": {0: 0.3, 50: 0.4} for k in ks}
    runs = [(a, "m", s, curves) for a, s in cells]
    data = study_data(runs, algorithms=ALGOS, reference="grpo", replicates={"grpo_again": "grpo"},
                      positive_control="grpo_random")  # fmt: skip
    rows = _rows(data.trials, 0, {c: base for c in cells}, samples)
    rows += _rows(data.trials, 50, {c: final(*c) for c in cells}, samples)
    return dataclasses.replace(data, samples=pd.DataFrame(rows))


def sharpened(arm: str, seed: int) -> list[int]:
    """RL that sharpens: solvable problems gain 3 + seed % 3 of 16 samples, the problem solved
    once in 16 is lost (pass@8 falls there), the unsolved stay unsolved. The controls lose."""
    if arm in ("grpo_random", "grpo_format"):
        return [max(c - 1, 0) for c in BASE]
    gain = 3 + seed % 3
    return [0 if c == 1 else min(c + gain, 16) if c else 0 for c in BASE]


def uniform(arm: str, seed: int) -> list[int]:
    """RL that helps every problem alike: each problem's failures cut by half (± a sample)."""
    return [16 - (16 - c) // 2 - (seed % 2) for c in BASE]


def test_only_rl_arms_on_real_rewards_count():
    data = study(sharpened)
    # the A/A replicate, the positive control and any other reward control are left out
    assert headroom.real_reward_arms(data) == ["grpo", "dr_grpo"]
    c = judged(claim6(study(sharpened, arms=(*RL, "grpo_again", "grpo_random"))))
    assert c.arms == "grpo, dr_grpo"
    assert "left out: grpo_again (A/A replicate), grpo_random (positive control)" in c.note


def test_claim_6_needs_k_of_at_least_8_from_at_least_2k_samples():
    assert headroom.large_k(study(sharpened, ks=(1, 8)), 16) == 8
    assert headroom.large_k(study(sharpened, ks=(1, 8, 32)), 64) == 32
    assert headroom.large_k(study(sharpened, ks=(1, 8)), 15) is None  # 15 < 2 · 8
    assert headroom.large_k(study(sharpened, ks=(1, 2)), 16) == 8  # k = 8 from the samples
    # the quickstart's eval: 2 samples per problem, pass@2
    quick = study(lambda a, s: [min(c, 2) for c in BASE], samples=2, ks=(1, 2), base=[1] * 64)
    c = claim6(quick)
    assert c.verdict == rules.NOT_TESTABLE and np.isnan(c.value)
    assert "needs k >= 8 from >= 2k samples" in c.note and "draws 2 per problem" in c.note
    assert "logged k: 1, 2" in c.note
    eight = claim6(study(sharpened, samples=8, base=[min(c, 8) for c in BASE]))
    assert eight.verdict == rules.NOT_TESTABLE and "draws 8 per problem" in eight.note


def test_sharpening_rl_supports_claim_6_about_the_task():
    c = judged(claim6(study(sharpened, arms=RL)))
    assert c.verdict == rules.SUPPORTED and c.n == 6 and c.value > 0
    assert c.reading.startswith("task: 6 seeds × 64 problems") and "pass@8" in c.statistic
    assert c.p_exact_holm < 0.05 and c.margin is None  # the share scale has no declared margin


def test_a_uniform_improvement_does_not_support_it_on_the_headroom_scale():
    # every failure rate halved: pass@8 closes more of its (smaller) headroom than pass@1
    data = study(uniform, arms=RL)
    c = judged(claim6(data))
    assert c.value < 0 and c.verdict != rules.SUPPORTED

    # the raw gains say the opposite: pass@1 gains 0.41, pass@8 at most its headroom 0.36
    def pass_at(counts, k):
        return estimand.pass_at_k(np.array(counts), 16, k).mean()

    raw = [pass_at(uniform("grpo", 0), k) - pass_at(BASE, k) for k in (1, 8)]
    assert raw[0] > raw[1] and 1 - pass_at(BASE, 8) == pytest.approx(0.36, abs=0.01)


def test_only_complete_seeds_count_and_5_of_them_cannot_support_it():
    c = judged(claim6(study(sharpened, arms=RL, skip={("dr_grpo", 5)})))
    assert c.n == 5 and "seeds [5] left out: not every arm completed them" in c.note
    assert rules.verdict_text(c) == "not testable at 5 seeds" and c.p_holm < 0.05


def test_claim_6_refuses_a_base_at_the_ceiling_and_a_study_without_a_base_eval():
    full = study(lambda a, s: [16] * 64, arms=RL, base=[15] * 64)  # base pass@8 = 1
    c = claim6(full)
    assert c.verdict == rules.NOT_TESTABLE and "no headroom" in c.note
    data = study(sharpened, arms=RL)
    no_base = dataclasses.replace(data, samples=data.samples[data.samples["step"] > 0])
    c = claim6(no_base)
    assert c.verdict == rules.NOT_TESTED and "step-0" in c.note


def test_linearised_values_average_to_the_statistic_and_move_with_each_cell():
    f1, b1 = np.array([[0.7, 0.8]]), np.full((1, 2), 0.5)
    fk, bk = np.full((1, 2), 0.875), np.full((1, 2), 0.75)
    # shares (0.75 − 0.5)/0.5 = 0.5 and (0.875 − 0.75)/0.25 = 0.5: T = 0; each cell's pass@1
    # moves it by (f − F)/(1 − B) = ±0.05/0.5
    assert headroom.linearised(f1, b1, fk, bk) == pytest.approx(np.array([[-0.1, 0.1]]))
    rng = np.random.default_rng(0)
    f1, b1, fk, bk = rng.uniform(0.1, 0.6, size=(4, 3, 5))
    t = headroom.headroom_share(f1.mean(), b1.mean()) - headroom.headroom_share(
        fk.mean(), bk.mean()
    )
    assert headroom.linearised(f1, b1, fk, bk).mean() == pytest.approx(t)
