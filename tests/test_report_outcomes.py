"""Divergence, saturation and failure as outcomes (`ablate.report.stats.outcomes`): exact
intervals and tests by hand, the classification of how trials end, and the tables."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy import stats as sps

from ablate.baselines import baseline
from ablate.report.render import formats
from ablate.report.render.secondary import has_lost_trials, outcomes_table, survivors_table
from ablate.report.stats import outcomes as oc
from ablate.testing import study_data

GRPO = dataclasses.replace(baseline("grpo"), kl_coef=0.0)
ALGOS = {"grpo": GRPO, "wild": dataclasses.replace(GRPO, clip_high=0.28)}
SATURATION = (
    "dynamic sampling found 3 of 8 groups with unequal rewards after max_gen_batches=3 "
    "generation batches: the base model's groups are almost all correct or all wrong"
)


def test_clopper_pearson_by_hand():
    # k = 0: the upper end solves (1 - p)^n = 0.025, p = 1 - 0.025^(1/n)
    low, high = oc.clopper_pearson(0, 5)
    assert low == 0.0 and high == pytest.approx(1 - 0.025 ** (1 / 5))
    low, high = oc.clopper_pearson(5, 5)
    assert high == 1.0 and low == pytest.approx(0.025 ** (1 / 5))
    # 1 of 2: symmetric, ends where the binomial tails reach 0.025: p^2 and 1 - (1 - p)^2
    low, high = oc.clopper_pearson(1, 2)
    assert low == pytest.approx(1 - np.sqrt(0.975)) and high == pytest.approx(np.sqrt(0.975))
    # vectorised, and no interval at n = 0
    lows, highs = oc.clopper_pearson(np.array([1, 0]), np.array([10, 0]))
    ci = sps.binomtest(1, 10).proportion_ci(0.95, method="exact")
    assert (lows[0], highs[0]) == pytest.approx((ci.low, ci.high)) and np.isnan(lows[1])


def test_clopper_pearson_covers_at_least_its_level():
    # exact coverage over every outcome of Binomial(n, p): never below 0.95 (a Wald interval is)
    n = 10
    k = np.arange(n + 1)
    low, high = oc.clopper_pearson(k, n)
    wald = 1.96 * np.sqrt(k / n * (1 - k / n) / n)
    for p in (0.02, 0.1, 0.3, 0.5):
        weight = sps.binom.pmf(k, n, p)
        assert weight[(low <= p) & (p <= high)].sum() >= 0.95
    assert sps.binom.pmf(k, n, 0.1)[np.abs(k / n - 0.1) <= wald].sum() < 0.95  # the known-bad


def test_fisher_p_by_hand_and_no_test_without_events():
    # 3/5 vs 0/5: margins 3 events in 10; P(table) = C(5,3)C(5,0)/C(10,3) = 10/120 each tail
    assert oc.fisher_p(3, 5, 0, 5) == pytest.approx(2 * 10 / 120)
    assert np.isnan(oc.fisher_p(0, 5, 0, 5))  # no event: one possible table, no test
    assert np.isnan(oc.fisher_p(5, 5, 4, 4))  # only events: likewise
    assert np.isnan(oc.fisher_p(1, 0, 0, 5))


def _trials(outcomes: dict[str, list[str]]):
    """One run per (arm, seed) on model m with the given outcome ('saturated' = a failed run
    with the dynamic-sampling message)."""
    runs = []
    for arm, ends in outcomes.items():
        for seed, end in enumerate(ends):
            final = {"eval/pass_at_1": {0: 0.4, 10: 0.6 if arm == "wild" else 0.5}}
            runs.append((arm, "m", seed, final, "failed" if end == "saturated" else end))
    data = study_data(runs, algorithms=ALGOS, reference="grpo")
    t = data.trials.copy()
    t.loc[[i for i, r in enumerate(runs) if outcomes[r[0]][r[2]] == "saturated"], "reason"] = (
        SATURATION
    )
    return dataclasses.replace(data, trials=t)


def test_fisher_false_positive_rate_under_the_null_is_at_most_alpha():
    # exact, over every pair of outcomes of two Binomial(n, p) arms at the seed counts users run
    for n in (3, 5, 10):
        k = np.arange(n + 1)
        reject = np.array([[oc.fisher_p(a, n, b, n) < 0.05 for b in k] for a in k])
        for p in (0.1, 0.3, 0.5):
            weight = np.outer(sps.binom.pmf(k, n, p), sps.binom.pmf(k, n, p))
            assert weight[reject].sum() <= 0.05
    # the check can fail: a one-sided z test of two proportions at 0.05 rejects too often
    n, k = 10, np.arange(11)
    pooled = (k[:, None] + k[None, :]) / (2 * n)
    with np.errstate(invalid="ignore", divide="ignore"):
        z = (k[:, None] - k[None, :]) / n / np.sqrt(pooled * (1 - pooled) * 2 / n)
    weight = np.outer(sps.binom.pmf(k, n, 0.3), sps.binom.pmf(k, n, 0.3))
    assert weight[np.nan_to_num(np.abs(z)) > 1.645].sum() > 0.05


def test_saturation_is_the_algorithms_outcome_not_a_failure():
    data = _trials(
        {
            "grpo": ["finished"] * 5,
            "wild": ["diverged", "diverged", "saturated", "failed", "finished"],
        }
    )
    classes = oc.outcome_class(data.trials)
    assert list(classes) == ["finished"] * 5 + [
        "diverged",
        "diverged",
        "saturated",
        "failed",
        "finished",
    ]
    rows = {r.outcome: r for r in oc.outcome_contrasts(data)}
    assert list(rows) == ["diverged", "saturated", "failed"]
    # divergence over the 4 algorithm outcomes (the failed run says nothing about it)
    assert (rows["diverged"].k, rows["diverged"].n) == (2, 4)
    assert (rows["saturated"].k, rows["saturated"].n) == (1, 4)
    assert (rows["failed"].k, rows["failed"].n) == (1, 5)  # the saturated run is not counted
    # Boschloo's exact test, the two arms as the table's columns
    assert rows["diverged"].p_value == pytest.approx(sps.boschloo_exact([[2, 0], [2, 5]]).pvalue)
    # Holm over the table's three tests
    p = [rows[k].p_value for k in ("diverged", "saturated", "failed")]
    assert [rows[k].p_holm for k in rows] == pytest.approx(list(oc.inference.holm(p)))
    assert rows["diverged"].rate.low == pytest.approx(oc.clopper_pearson(2, 4)[0])


def test_outcome_and_survivor_tables():
    data = _trials({"grpo": ["finished"] * 4, "wild": ["diverged"] + ["finished"] * 3})
    table = outcomes_table(data)
    assert [r["outcome"] for r in table.rows] == ["diverged", "failed"]  # no saturation seen
    first = table.rows[0]
    assert first["arm k/n"] == "1/4" and first["reference k/n"] == "0/4"
    assert np.isnan(table.rows[1]["p (Boschloo)"])  # no failure anywhere: no test
    assert "Clopper–Pearson" in table.caption and "saturated" in table.caption
    md = formats.to_markdown(table)
    assert "0.25 [0.01, 0.81]" in md  # the exact interval's two ends, asymmetric
    assert has_lost_trials(data)
    survivors = {r["arm"]: r for r in survivors_table(data).rows}
    wild = survivors["wild"]
    # headline: (0 + 0.6 * 3) / 4; survivors: 0.6
    assert wild["pass@1, diverged = 0"].value == pytest.approx(0.45)
    assert wild["pass@1, finished only"].value == pytest.approx(0.6)
    assert (wild["finished"], wild["diverged"], wild["saturated"]) == (3, 1, 0)
    assert not has_lost_trials(_trials({"grpo": ["finished"] * 3, "wild": ["finished"] * 3}))


def test_survival_caveats_name_saturation_apart_from_failures():
    from ablate.report.claims.sentences import survival_caveats

    data = _trials({"grpo": ["finished"] * 3, "wild": ["saturated", "failed", "finished"]})
    text = " ".join(survival_caveats(data))
    assert "1 of 3 wild trials saturated" in text and "not a failure" in text
    assert "wild: 1 failed and 0 missing/unfinished" in text


def test_claim_sentences_print_the_verdict_with_its_margin():
    from ablate.report.claims import rules
    from ablate.report.claims.sentences import claim_sentences, finding_sentences

    c = rules.Claim(
        "6", "RL raises pass@1 more", "t", value=0.001, low=-0.02, high=0.022, low90=-0.016,
        high90=0.018, n=6, verdict=rules.EQUIVALENT, margin=0.03,
    )  # fmt: skip
    (text,) = claim_sentences([c])
    assert "is equivalent within ±0.03" in text and "[−0.016, +0.018] lies inside ±0.03" in text
    bad = dataclasses.replace(c, value=-0.1, low=-0.15, high=-0.05, p_holm=0.001)
    (text,) = finding_sentences([dataclasses.replace(bad, verdict=rules.CONTRADICTED)])
    assert "contradicted" in text and "beyond ±0.03 against the claim" in text
    assert claim_sentences([dataclasses.replace(c, verdict=rules.INCONCLUSIVE)]) == []
