"""One estimand for every claim (issue 42): a claim on an eval pass rate is the headline's crossed
seeds × problems contrast; a training metric is read over seeds and says so; up to 10 seeds the
exact sign-flip test must agree with the t before a claim is supported or contradicted."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy import stats as sps

from ablate.factors.algorithms import Algorithm
from ablate.factors.finding import Finding
from ablate.report.claims import estimand, rules
from ablate.report.claims.paper import finding_claims
from ablate.report.render.claim_tables import claims_table
from ablate.report.stats import contrasts
from ablate.testing import study_data

BASE = rules.Claim("x", "arm changes pass@1", "Δ pass@1", direction=0, margin=0.03)
GRPO4 = Algorithm(minibatches=4, kl_coef=0.0)
ARMS = {"grpo4": GRPO4, "no_std": dataclasses.replace(GRPO4, scale="none")}


def judged(claim: rules.Claim) -> rules.Claim:
    return rules.adjudicate([claim])[0]


# --- the crossed contrast, by hand ---------------------------------------------------------
def test_a_3x4_matrix_with_seed_variation_only_is_a_t_over_its_3_seeds():
    d = np.repeat([[0.1], [0.2], [0.3]], 4, axis=1)  # [3 seeds, 4 problems], no problem term
    c = estimand.task_claim(BASE, d)
    se = 0.1 / np.sqrt(3)  # SD of the seed means 0.1, 0.2, 0.3 over sqrt(3); df = n − 1 = 2
    assert c.value == pytest.approx(0.2) and c.n == 3
    assert c.high - c.value == pytest.approx(sps.t.ppf(0.975, 2) * se)
    assert c.high90 - c.value == pytest.approx(sps.t.ppf(0.95, 2) * se)
    assert c.p_value == pytest.approx(2 * sps.t.sf(0.2 / se, 2))
    assert c.reading == "task: 3 seeds × 4 problems (crossed, df 2)"


def test_an_arm_by_problem_interaction_widens_a_3x4_claim_at_its_bounded_df():
    d = np.add.outer([0.1, 0.2, 0.3], [-0.1, 0.1, -0.1, 0.1])  # seeds + problems, no residual
    # MS_seed = 4·(0.01 + 0 + 0.01)/2 = 0.04, MS_problem = 3·(4·0.01)/3 = 0.04, MS_resid = 0:
    # Var(mean) = (MS_seed + MS_problem − MS_resid)/(3·4)
    se = np.sqrt(0.08 / 12)
    bounded = [(0.04 * nu / sps.chi2.ppf(0.10, nu), nu) for nu in (2, 3)]  # each MS at its bound
    df = sum(t for t, _ in bounded) ** 2 / sum(t**2 / nu for t, nu in bounded)
    c = estimand.task_claim(BASE, d)
    assert c.value == pytest.approx(0.2)
    assert c.high - c.value == pytest.approx(sps.t.ppf(0.975, df) * se)
    assert f"df {df:.3g})" in c.reading and 3.9 < df < 4.0
    # the seed-level reading sees the seed means 0.1, 0.2, 0.3 only: a standard error √2 too
    # small (its interval is wider here only for its 2 df against about 4)
    seeds = rules.seed_claim(BASE, d.mean(axis=1), np.zeros(3))
    seed_se = (seeds.high - seeds.value) / sps.t.ppf(0.975, 2)
    assert seed_se == pytest.approx(0.1 / np.sqrt(3)) and se / seed_se == pytest.approx(np.sqrt(2))
    assert seeds.reading.startswith("seed-level")


# --- the exact test beside the t ------------------------------------------------------------
def test_the_exact_sign_flip_p_of_five_positive_differences_is_2_in_32():
    assert rules.exact_p([0.1, 0.3, 0.2, 0.5, 0.4]) == pytest.approx(2 / 32)
    # |Σ| = 0.9 of 1.5: as extreme are the patterns flipping a subset summing to <= 0.3 ({},
    # {0.1}, {0.2}, {0.3}, {0.1, 0.2}) and their mirror images: 10 of 32
    assert rules.exact_p([0.1, -0.3, 0.2, 0.5, 0.4]) == pytest.approx(10 / 32)
    assert rules.exact_floor(5) == pytest.approx(0.0625)
    assert np.isnan(rules.exact_p(np.ones(11)))  # beyond EXACT_SEEDS_MAX the t decides alone
    assert np.isnan(rules.exact_p([1.0, 2.0]))  # below MIN_SEEDS: no test


def test_a_t_that_decides_at_5_seeds_is_not_testable_there_and_supported_at_6():
    five = judged(rules.seed_claim(BASE, np.arange(10, 15) / 100, np.zeros(5)))
    assert five.p_value < 1e-4 and five.p_holm < 0.05 and five.p_exact == pytest.approx(0.0625)
    assert five.verdict == rules.NOT_TESTABLE and five.few_seeds
    assert rules.verdict_text(five) == "not testable at 5 seeds"
    assert "2/2^5 = 0.0625" in five.note and "the t test alone would say supported" in five.note
    six = judged(rules.seed_claim(BASE, np.arange(10, 16) / 100, np.zeros(6)))
    assert six.verdict == rules.SUPPORTED and six.p_exact_holm == pytest.approx(1 / 32)


def test_an_exact_test_that_could_have_agreed_but_does_not_leaves_the_claim_inconclusive():
    # t: mean 0.87, SD 0.45 over 6 seeds, p ≈ 0.005; exact: flipping −0.05 keeps |Σ| ≥ 5.2,
    # so 4 of 64 patterns are as extreme, p = 0.0625, above its floor 1/32
    diffs = np.array([1.0, 1.1, 0.9, 1.2, 1.05, -0.05])
    c = judged(rules.seed_claim(dataclasses.replace(BASE, margin=None), diffs, np.zeros(6)))
    assert c.p_holm < 0.01 and c.p_exact == pytest.approx(4 / 64)
    assert c.verdict == rules.INCONCLUSIVE and not c.few_seeds
    assert "the exact sign-flip test (Holm) gives p = 0.0625" in c.note


def test_the_exact_p_is_holm_adjusted_like_the_t():
    claims = [rules.seed_claim(BASE, np.arange(10, 16) / 100 + i, np.zeros(6)) for i in (0, 1)]
    judged_ = rules.adjudicate(claims)
    # alone each would be supported (1/32); Holm over two: 2/32 for both
    assert [c.p_exact_holm for c in judged_] == pytest.approx([2 / 32, 2 / 32])
    assert all(c.verdict == rules.NOT_TESTABLE and c.few_seeds for c in judged_)
    assert "(0.0625 after Holm)" in judged_[0].note


def test_a_claim_of_no_effect_is_contradicted_only_when_the_exact_test_of_the_margin_agrees():
    null = dataclasses.replace(BASE, null=True)
    six = judged(rules.seed_claim(null, 0.1 + np.arange(6) / 1000, np.zeros(6)))
    assert six.verdict == rules.CONTRADICTED  # all 6 differences above +0.03: p = 1/32
    five = judged(rules.seed_claim(null, 0.1 + np.arange(5) / 1000, np.zeros(5)))
    assert (
        five.verdict == rules.NOT_TESTABLE and rules.verdict_text(five) == "not testable at 5 seeds"
    )
    # equivalence reads the 90% interval alone: 5 seeds can show it
    tiny = judged(rules.seed_claim(null, np.array([1, -1, 2, -2, 0]) / 1000, np.zeros(5)))
    assert tiny.verdict == rules.EQUIVALENT


# --- findings: eval pass rates about the task, training metrics over seeds ------------------
def _finding(**kw) -> Finding:
    fields = dict(
        id="std", paper="p", statement="no std − std, pass@1", study="synthetic", model="m",
        arm="no_std", reference="grpo4", direction=1, mechanism="policy/grad_norm",
    )  # fmt: skip
    return Finding(**{**fields, **kw})


def _interaction_study(seeds: int = 6, problems: int = 8, samples: int = 4):
    """no_std solves half the problems every time and the other half 1 in 4; grpo4 solves each
    2 in 4: +0.5 and −0.25 by problem, +0.125 per seed plus a little seed noise."""
    runs, outcomes = [], {}
    for s in range(seeds):
        for arm in ARMS:
            counts = [2] * problems if arm == "grpo4" else [4, 1] * (problems // 2)
            if arm == "no_std" and s % 2:
                counts[s % problems] -= 1  # seed noise: one sample fewer on one problem
            outcomes[(arm, s)] = [[1] * c + [0] * (samples - c) for c in counts]
            curves = {"eval/pass_at_1": {0: 0.5, 10: np.mean(counts) / samples}}
            runs.append((arm, "m", s, curves | {"policy/grad_norm": [1.0, 1.0]}))
    data = study_data(runs, algorithms=ARMS, reference="grpo4", samples=outcomes)
    return dataclasses.replace(data, equivalence_margin=0.03)


def test_a_finding_on_pass_at_1_is_the_headlines_crossed_contrast_about_the_task():
    data = _interaction_study()
    (c,) = finding_claims([_finding()], {"synthetic": data})
    assert c.reading.startswith("task: 6 seeds × 8 problems")
    x, y = estimand.pair_matrices(data, estimand.final_rates_k(data, 1), "no_std", "grpo4", "m",
                                  "plain")  # fmt: skip
    headline, interval90 = contrasts.task_contrast(x, y)
    assert (c.value, c.low, c.high) == pytest.approx(
        (headline.diff.value, headline.diff.low, headline.diff.high)
    )
    assert (c.low90, c.high90) == pytest.approx(interval90)
    # the arm × problem interaction puts 0 inside the task-level interval: not supported,
    # although every seed's mean difference is positive (the seed-level t would support it)
    assert c.low < 0 < c.high and c.verdict == rules.INCONCLUSIVE
    seeds = judged(rules.seed_claim(BASE, x.mean(axis=1), y.mean(axis=1)))
    assert seeds.verdict == rules.SUPPORTED


def test_a_finding_on_a_training_metric_or_without_problem_records_is_read_over_seeds():
    data = _interaction_study()
    training = _finding(measure="policy/grad_norm", mechanism="policy/grad_norm")
    (c,) = finding_claims([training], {"synthetic": data})
    assert c.reading == "seed-level (a training metric, no problem dimension)"
    bare = dataclasses.replace(data, samples=data.samples.iloc[:0])
    (c,) = finding_claims([_finding()], {"synthetic": bare})
    assert c.reading == "seed-level (no per-problem eval records: given these problems)"


def test_pass_at_k_per_problem_is_unbiased_by_hand():
    # 1 correct of 4, k = 2: 1 − C(3, 2)/C(4, 2) = 1 − 3/6; all wrong: 0; k > K: no estimate
    got = estimand.pass_at_k(np.array([1, 0, 4, 1]), np.array([4, 4, 4, 1]), 2)
    assert got[:3] == pytest.approx([0.5, 0.0, 1.0]) and np.isnan(got[3])
    assert estimand.pass_k("eval/pass_at_8") == 8 and estimand.pass_k("policy/entropy") is None


def test_the_claims_table_prints_the_exact_p_and_the_reading_beside_the_t():
    table = claims_table(_interaction_study())
    assert {"p", "p exact", "p (Holm)", "p exact (Holm)", "reading"} <= set(table.columns)
    assert "exact sign-flip test" in table.caption and "crossed" in table.caption
