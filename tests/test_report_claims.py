"""Each claim of ablate.report.claims on synthetic frames built to support it, to contradict it
and to leave it inconclusive (plus the 'not tested' paths)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from ablate.presets import baseline
from ablate.report import claims
from ablate.report.load import StudyData

SEEDS = range(6)  # 6 matched seeds: the smallest N whose exact sign-flip p can be < 0.05
GRPO = baseline("grpo")
ALGOS = {
    "grpo": GRPO,
    "dr_grpo": baseline("dr_grpo"),
    "grpo_ch": dataclasses.replace(GRPO, clip_high=0.28),
}


def make(runs, passk=None, group_size=8, reference="grpo") -> StudyData:
    """runs: (arm, model, seed, {metric: [value per step]}) -> a StudyData of complete trials."""
    trials, history = [], []
    for i, (arm, model, seed, curves) in enumerate(runs):
        row = dict(trial_id=f"t{i}", arm=arm, model=model, template="plain", seed=seed)
        row.update({f"algo.{k}": v for k, v in dataclasses.asdict(ALGOS[arm]).items()})
        trials.append(
            {
                **row,
                "status": "FINISHED",
                "outcome": "finished",
                "reason": "",
                "run_id": f"r{i}",
                "complete": True,
            }
        )
        for metric, values in curves.items():
            for step, value in enumerate(values):
                history.append(
                    dict(
                        trial_id=f"t{i}",
                        arm=arm,
                        model=model,
                        template="plain",
                        seed=seed,
                        step=step,
                        metric=metric,
                        value=float(value),
                    )
                )
    return StudyData(
        "synthetic",
        reference,
        pd.DataFrame(trials),
        pd.DataFrame(history),
        pd.DataFrame(),
        passk if passk is not None else pd.DataFrame(),
        group_size,
        80,
    )


# --- 1a --------------------------------------------------------------------------------------
def test_token_weights_by_hand():
    # two rows of 4 and 2 tokens: per-sequence token mean gives 1/(2*4) and 1/(2*2)
    assert claims.token_weights("seq_mean_token_mean", None, 4, 2) == pytest.approx((0.125, 0.25))
    # sum / (rows * constant 8) gives 1/16 to every token
    assert claims.token_weights("seq_mean_token_sum_norm", 8, 4, 2) == pytest.approx((1 / 16,) * 2)


def test_1a_supported_by_the_presets_and_contradicted_by_equal_weights():
    c = claims.claim_1a(make([]))
    assert c.verdict == claims.SUPPORTED and c.value == pytest.approx(0.5)
    assert claims.claim_1a_verdict(1.0, 1.0, 60, 30).verdict == claims.CONTRADICTED
    assert claims.claim_1a_verdict(0.5, 0.5, 60, 30).verdict == claims.CONTRADICTED


# --- 1b --------------------------------------------------------------------------------------
def _lengths(grpo_growth, dr_growth, seeds=SEEDS):
    runs = []
    for s in seeds:
        runs.append(
            ("grpo", "m", s, {"length/incorrect_mean": np.linspace(30, 30 + grpo_growth(s), 8)})
        )
        runs.append(
            ("dr_grpo", "m", s, {"length/incorrect_mean": np.linspace(30, 30 + dr_growth(s), 8)})
        )
    return make(runs)


@pytest.mark.parametrize(
    ("grpo", "dr", "expected"),
    [
        (lambda s: 10 + s, lambda s: 0.5 * s, claims.SUPPORTED),
        (lambda s: -10 - s, lambda s: 0.5 * s, claims.CONTRADICTED),
        (lambda s: (-1) ** s * 5, lambda s: 0.0, claims.INCONCLUSIVE),
    ],
)
def test_1b_length_growth(grpo, dr, expected):
    c = claims.claim_1b(_lengths(grpo, dr))
    assert c.verdict == expected and c.n == 6 and c.arms == "grpo vs dr_grpo"


def test_1b_with_three_seeds_cannot_be_supported_however_large_the_effect():
    c = claims.claim_1b(_lengths(lambda s: 100, lambda s: 0, seeds=range(3)))
    assert c.verdict == claims.INCONCLUSIVE and c.p_value == pytest.approx(0.25)


def test_1b_not_tested_without_a_dr_grpo_arm():
    data = make([("grpo", "m", 0, {"length/incorrect_mean": [1, 2]})])
    assert claims.claim_1b(data).verdict == claims.NOT_TESTED


# --- 2 ---------------------------------------------------------------------------------------
def _entropy(delta, clip_binds=0.05):
    runs = []
    for s in SEEDS:
        common = {"policy/clip_frac_high": [clip_binds] * 8}
        runs.append(("grpo", "m", s, {**common, "entropy/mean": [0.1] * 8}))
        runs.append(("grpo_ch", "m", s, {**common, "entropy/mean": [0.1 + delta(s)] * 8}))
    return make(runs)


@pytest.mark.parametrize(
    ("delta", "expected"),
    [
        (lambda s: 0.02 + 0.001 * s, claims.SUPPORTED),
        (lambda s: -0.02 - 0.001 * s, claims.CONTRADICTED),
        (lambda s: (-1) ** s * 0.01, claims.INCONCLUSIVE),
    ],
)
def test_2_clip_higher_entropy(delta, expected):
    c = claims.claim_2(_entropy(delta))
    assert c.verdict == expected and c.arms == "grpo_ch vs grpo" and "5.00%" in c.note


def test_2_not_testable_when_the_upper_clip_barely_binds():
    c = claims.claim_2(_entropy(lambda s: 0.05, clip_binds=0.003))
    assert c.verdict == claims.NOT_TESTABLE and "0.30%" in c.note


# --- 3 ---------------------------------------------------------------------------------------
def _ratios(token_sign, seq_sign, n=6):
    length = np.arange(20, 28)
    runs = []
    for s in range(n):
        sign = token_sign(s)
        runs.append(
            (
                "grpo",
                "m",
                s,
                {
                    "length/mean": length,
                    "policy/ratio_var": sign * length * 1e-3,
                    "policy/seq_ratio_var": seq_sign(s) * length * 1e-4,
                },
            )
        )
    return make(runs)


@pytest.mark.parametrize(
    ("tok", "seq", "expected"),
    [
        (lambda s: 1, lambda s: -1, claims.SUPPORTED),
        (lambda s: -1, lambda s: 1, claims.CONTRADICTED),
        (lambda s: (-1) ** s, lambda s: (-1) ** s, claims.INCONCLUSIVE),
    ],
)
def test_3_ratio_variance_against_length(tok, seq, expected):
    assert claims.claim_3(_ratios(tok, seq)).verdict == expected


def test_3_not_testable_when_ratios_are_constant():
    assert claims.claim_3(_ratios(lambda s: 0, lambda s: 0)).verdict == claims.NOT_TESTABLE


# --- 4 ---------------------------------------------------------------------------------------
def _gain_vs_passg(gain_of, pass_g=(0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 0.95, 1.0)):
    models = [f"m{i}" for i in range(len(pass_g))]
    runs = [
        ("grpo", mdl, 0, {"eval/pass_at_1": [0.2, 0.2 + gain_of(pg)]})
        for mdl, pg in zip(models, pass_g, strict=True)
    ]
    passk = pd.DataFrame(
        dict(
            model=models,
            template="plain",
            k=8,
            pass_at_k=pass_g,
            ci_low=pass_g,
            ci_high=pass_g,
            n_problems=64,
        )
    )
    return make(runs, passk=passk)


@pytest.mark.parametrize(
    ("gain", "expected"),
    [
        (lambda pg: 0.3 * pg, claims.SUPPORTED),
        (lambda pg: 0.3 * (1 - pg), claims.CONTRADICTED),
        (lambda pg: 0.1 * np.sin(40 * pg), claims.INCONCLUSIVE),
    ],
)
def test_4_gain_grows_with_base_pass_at_g(gain, expected):
    c = claims.claim_4(_gain_vs_passg(gain))
    assert c.verdict == expected and c.n == 8


def test_4_not_tested_with_two_base_models():
    c = claims.claim_4(_gain_vs_passg(lambda pg: pg, pass_g=(0.0, 1.0)))
    assert c.verdict == claims.NOT_TESTED


# --- 5 ---------------------------------------------------------------------------------------
def _templates(p_other, half_width):
    p = [0.5, p_other]
    return make(
        [],
        passk=pd.DataFrame(
            dict(
                model="m",
                template=["plain", "plain_q"],
                k=1,
                pass_at_k=p,
                ci_low=[x - half_width for x in p],
                ci_high=[x + half_width for x in p],
                n_problems=64,
            )
        ),
    )


@pytest.mark.parametrize(
    ("p_other", "half", "expected"),
    [
        (0.1, 0.05, claims.SUPPORTED),
        (0.5, 0.005, claims.CONTRADICTED),
        (0.45, 0.2, claims.INCONCLUSIVE),
    ],
)
def test_5_template_changes_base_pass_at_k(p_other, half, expected):
    assert claims.claim_5(_templates(p_other, half)).verdict == expected


def test_template_contrasts_holm_adjusts_across_models():
    passk = pd.DataFrame(
        dict(
            model=["a", "a", "b", "b"],
            template=["t0", "t1"] * 2,
            k=1,
            pass_at_k=[0.5, 0.3, 0.5, 0.5],
            ci_low=[0.4, 0.2, 0.4, 0.4],
            ci_high=[0.6, 0.4, 0.6, 0.6],
            n_problems=64,
        )
    )
    out = claims.template_contrasts(passk)
    assert list(out["model"]) == ["a", "b"]
    assert out["diff"].tolist() == pytest.approx([-0.2, 0.0])
    assert out["p_holm"].iloc[0] == pytest.approx(min(1.0, 2 * out["p"].iloc[0]))


# --- 6 ---------------------------------------------------------------------------------------
def _pass_gains(g1, gk):
    runs = [
        (
            "grpo",
            "m",
            s,
            {"eval/pass_at_1": [0.3, 0.3 + g1(s)], "eval/pass_at_8": [0.8, 0.8 + gk(s)]},
        )
        for s in SEEDS
    ]
    return make(runs)


@pytest.mark.parametrize(
    ("g1", "gk", "expected"),
    [
        (lambda s: 0.1 + 0.01 * s, lambda s: 0.0, claims.SUPPORTED),
        (lambda s: 0.0, lambda s: 0.1 + 0.01 * s, claims.CONTRADICTED),
        (lambda s: (-1) ** s * 0.05, lambda s: 0.0, claims.INCONCLUSIVE),
    ],
)
def test_6_pass_at_1_gains_more_than_pass_at_k(g1, gk, expected):
    c = claims.claim_6(_pass_gains(g1, gk))
    assert c.verdict == expected and c.n == 6


def test_verdict_rule_needs_both_ci_and_p():
    from ablate.report.stats import Estimate

    assert claims.verdict(Estimate(1, 0.5, 2, 6), 0.03) == claims.SUPPORTED
    assert claims.verdict(Estimate(1, 0.5, 2, 3), 0.25) == claims.INCONCLUSIVE
    assert claims.verdict(Estimate(-1, -2, -0.5, 6), 0.03) == claims.CONTRADICTED
    assert claims.verdict(Estimate(1, -0.5, 2, 6), 0.01) == claims.INCONCLUSIVE
