"""Each claim of ablate.report.claims (tutorial, analytic) on synthetic frames built to support
it, to contradict it and to leave it inconclusive (plus the 'not tested' paths)."""

from __future__ import annotations

import dataclasses
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from ablate.baselines import baseline
from ablate.report.claims import analytic, arms, rules, tutorial
from ablate.report.data.load import StudyData
from ablate.report.stats import inference
from ablate.report.stats.template_contrasts import template_contrasts

SEEDS = range(6)
GRPO = dataclasses.replace(baseline("grpo"), kl_coef=0.0)  # no KL: it would confound the pairs
ALGOS = {
    "grpo": GRPO,
    "dr_grpo": baseline("dr_grpo"),
    "grpo_ch": dataclasses.replace(GRPO, clip_high=0.28),
    "grpo_ch_mb4": dataclasses.replace(GRPO, clip_high=0.28, minibatches=4),
    "grpo_kl": baseline("grpo"),
}


def judged(claim: rules.Claim) -> rules.Claim:
    """The claim after the study-wide step: Holm over the tested claims, then the verdict."""
    return rules.adjudicate([claim])[0]


def make(
    runs, passk=None, group_size=8, reference="grpo", algorithms=True, margin=None
) -> StudyData:
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
    columns = ["trial_id", "arm", "model", "template", "seed", "status", "outcome", "complete"]
    return StudyData(
        "synthetic",
        reference,
        pd.DataFrame(trials) if trials else pd.DataFrame(columns=[*columns, "reason", "run_id"]),
        pd.DataFrame(history, columns=[*columns[:5], "step", "metric", "value"]),
        pd.DataFrame(),
        passk if passk is not None else pd.DataFrame(),
        group_size,
        80,
        algorithms=ALGOS if algorithms else {},
        equivalence_margin=margin,
    )


# --- 1a --------------------------------------------------------------------------------------
def test_token_weights_by_hand():
    # two rows of 4 and 2 tokens: per-sequence token mean gives 1/(2*4) and 1/(2*2)
    assert analytic.token_weights("seq_mean_token_mean", None, 4, 2) == pytest.approx((0.125, 0.25))
    # sum / (rows * constant 8) gives 1/16 to every token
    assert analytic.token_weights("seq_mean_token_sum_norm", 8, 4, 2) == pytest.approx(
        (1 / 16,) * 2
    )


def test_1a_is_analytic_it_holds_for_the_presets_and_fails_for_equal_weights():
    c = analytic.claim_length_norm_downweights_long_tokens(make([]))
    assert c.verdict == rules.HOLDS and c.value == pytest.approx(0.5)
    assert analytic.length_norm_weighting_verdict(1.0, 1.0, 60, 30).verdict == rules.FAILS
    assert analytic.length_norm_weighting_verdict(0.5, 0.5, 60, 30).verdict == rules.FAILS
    # reported apart from the empirical claims, never among their verdicts
    assert [c.id for c in analytic.analytic_claims(make([]))] == ["1a"]
    assert "1a" not in {c.id for c in tutorial.evaluate_claims(make([]))}


# --- 1b --------------------------------------------------------------------------------------
def _lengths(grpo_growth, dr_growth, seeds=SEEDS, grpo="grpo", algorithms=True):
    runs = []
    for s in seeds:
        runs.append(
            (grpo, "m", s, {"length/incorrect_mean": np.linspace(30, 30 + grpo_growth(s), 8)})
        )
        runs.append(
            ("dr_grpo", "m", s, {"length/incorrect_mean": np.linspace(30, 30 + dr_growth(s), 8)})
        )
    return make(runs, algorithms=algorithms)


@pytest.mark.parametrize(
    ("grpo", "dr", "expected"),
    [
        (lambda s: 10 + s, lambda s: 0.5 * s, rules.SUPPORTED),
        (lambda s: -10 - s, lambda s: 0.5 * s, rules.CONTRADICTED),
        (lambda s: (-1) ** s * 5, lambda s: 0.0, rules.INCONCLUSIVE),
    ],
)
def test_1b_length_growth(grpo, dr, expected):
    c = judged(tutorial.claim_std_norm_lengthens_wrong_answers(_lengths(grpo, dr)))
    assert c.verdict == expected and c.n == 6 and c.arms == "grpo vs dr_grpo"


def test_1b_three_seeds_give_a_t_but_no_exact_test_two_give_neither():
    three = judged(
        tutorial.claim_std_norm_lengthens_wrong_answers(
            _lengths(lambda s: 100 + s, lambda s: 0, seeds=range(3))
        )
    )
    # per-seed differences (the growth of the last minus the first quarter) 75, 75.75, 76.5:
    # the t is decisive, but 3 seeds have 8 sign patterns, the exact test's floor is 2/8
    assert three.n == 3 and three.p_value < 1e-3 and three.p_exact == pytest.approx(0.25)
    assert three.verdict == rules.NOT_TESTABLE and three.few_seeds
    assert rules.verdict_text(three) == "not testable at 3 seeds" and "2/2^3 = 0.25" in three.note
    assert three.reading.startswith("seed-level (a training metric")
    two = judged(
        tutorial.claim_std_norm_lengthens_wrong_answers(
            _lengths(lambda s: 100, lambda s: 0, seeds=range(2))
        )
    )
    assert two.verdict == rules.NOT_TESTABLE and "n=2" in two.note and not two.few_seeds


def test_1b_not_tested_when_the_pair_also_differs_in_kl_and_says_so():
    c = tutorial.claim_std_norm_lengthens_wrong_answers(
        _lengths(lambda s: 10, lambda s: 0, grpo="grpo_kl")
    )
    assert c.verdict == rules.NOT_TESTED and "kl_coef" in c.note


def test_pairs_rebuilt_from_the_frame_treat_none_fields_as_equal():
    # pandas stores None as NaN and NaN != NaN: dual_clip=None in both arms is no difference
    data = _lengths(lambda s: 10 + s, lambda s: 0, algorithms=False)
    assert data.algorithm("grpo").dual_clip is None
    assert judged(tutorial.claim_std_norm_lengthens_wrong_answers(data)).verdict == rules.SUPPORTED


def test_1b_not_tested_without_a_dr_grpo_arm():
    data = make([("grpo", "m", 0, {"length/incorrect_mean": [1, 2]})])
    assert tutorial.claim_std_norm_lengthens_wrong_answers(data).verdict == rules.NOT_TESTED


# --- 2 ---------------------------------------------------------------------------------------
def _entropy(delta, clip_binds=0.05, high="grpo_ch"):
    runs = []
    for s in SEEDS:
        common = {"policy/clip_frac_high": [clip_binds] * 8}
        runs.append(("grpo", "m", s, {**common, "entropy/mean": [0.1] * 8}))
        runs.append((high, "m", s, {**common, "entropy/mean": [0.1 + delta(s)] * 8}))
    return make(runs)


@pytest.mark.parametrize(
    ("delta", "expected"),
    [
        (lambda s: 0.02 + 0.001 * s, rules.SUPPORTED),
        (lambda s: -0.02 - 0.001 * s, rules.CONTRADICTED),
        (lambda s: (-1) ** s * 0.01, rules.INCONCLUSIVE),
    ],
)
def test_2_clip_higher_entropy(delta, expected):
    c = judged(tutorial.claim_clip_higher_keeps_entropy(_entropy(delta)))
    assert c.verdict == expected and c.arms == "grpo_ch vs grpo" and "5.00%" in c.note


def test_2_not_tested_when_clip_higher_comes_with_another_schedule():
    # DAPO's path credited clip-higher with 16 updates per rollout: such a pair is refused
    c = tutorial.claim_clip_higher_keeps_entropy(_entropy(lambda s: 0.05, high="grpo_ch_mb4"))
    assert c.verdict == rules.NOT_TESTED and "minibatches" in c.note


def test_2_not_testable_when_the_upper_clip_barely_binds():
    c = tutorial.claim_clip_higher_keeps_entropy(_entropy(lambda s: 0.05, clip_binds=0.003))
    assert c.verdict == rules.NOT_TESTABLE and "0.30%" in c.note and "barely acts" in c.note
    # the threshold is ACTS_MIN = 1%: a clip binding on 1.5% of tokens is tested
    assert arms.ACTS_MIN == 0.01
    tested = tutorial.claim_clip_higher_keeps_entropy(
        _entropy(lambda s: 0.02 + 0.001 * s, clip_binds=0.015)
    )
    assert judged(tested).verdict == rules.SUPPORTED and "1.50%" in tested.note


# --- 3 ---------------------------------------------------------------------------------------
def _ratios(token_sign, seq_sign, n=6, noise=2e-3):
    """Per seed, ratio variances that follow length with sign `token_sign(s)` / `seq_sign(s)`
    and some seed-specific noise (so the per-seed ρ differences vary: a constant difference
    would have no variance and no test)."""
    length = np.arange(20, 28)
    runs = []
    for s in range(n):
        jitter = np.random.default_rng(s).normal(0, noise, size=(2, len(length)))
        curves = {
            "length/mean": length,
            "policy/ratio_var": token_sign(s) * length * 1e-3 + jitter[0],
            "policy/seq_ratio_var": seq_sign(s) * length * 1e-4 + jitter[1] * 0.1,
        }
        runs.append(("grpo", "m", s, curves))
    return make(runs)


@pytest.mark.parametrize(
    ("tok", "seq", "expected"),
    [
        (lambda s: 1, lambda s: -1, rules.SUPPORTED),
        (lambda s: -1, lambda s: 1, rules.CONTRADICTED),
        (lambda s: (-1) ** s, lambda s: (-1) ** s, rules.INCONCLUSIVE),
    ],
)
def test_3_ratio_variance_against_length(tok, seq, expected):
    assert (
        judged(tutorial.claim_token_ratio_variance_grows_with_length(_ratios(tok, seq))).verdict
        == expected
    )


def test_3_averages_within_a_seed_so_n_counts_seeds_not_trials():
    data = _ratios(lambda s: 1, lambda s: -1, n=3)
    twice = dataclasses.replace(
        data,
        trials=pd.concat([data.trials, data.trials.assign(trial_id=lambda t: t["trial_id"] + "b")]),
        history=pd.concat(
            [data.history, data.history.assign(trial_id=lambda h: h["trial_id"] + "b")]
        ),
    )
    assert tutorial.claim_token_ratio_variance_grows_with_length(twice).n == 3  # 6 trials, 3 seeds


def test_3_not_testable_when_ratios_are_constant():
    assert (
        tutorial.claim_token_ratio_variance_grows_with_length(
            _ratios(lambda s: 0, lambda s: 0, noise=0.0)
        ).verdict
        == rules.NOT_TESTABLE
    )


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
        (lambda pg: 0.3 * pg, rules.SUPPORTED),
        (lambda pg: 0.3 * (1 - pg), rules.CONTRADICTED),
        (lambda pg: 0.1 * np.sin(40 * pg), rules.INCONCLUSIVE),
    ],
)
def test_4_gain_grows_with_base_pass_at_g(gain, expected):
    c = judged(tutorial.claim_gain_grows_with_base_pass_at_g(_gain_vs_passg(gain)))
    assert c.verdict == expected and c.n == 8


def test_4_permutation_p_over_cells_by_hand():
    # 4 cells in perfect order: of the 24 pairings only the identity and the reversal reach
    # |rho| = 1, so the two-sided exact p is 2/24 (four cells can never reach 0.05)
    rho, p = tutorial.permutation_rho(np.array([0.1, 0.2, 0.3, 0.4]), np.array([1.0, 2, 3, 4]))
    assert rho == pytest.approx(1.0) and p == pytest.approx(2 / 24)
    assert tutorial.structural_min_p(4) == pytest.approx(2 / 24)
    assert tutorial.structural_min_p(5) == pytest.approx(2 / 120)
    c = judged(
        tutorial.claim_gain_grows_with_base_pass_at_g(
            _gain_vs_passg(lambda pg: pg, pass_g=(0.0, 0.3, 0.6, 0.9))
        )
    )
    # even a perfect order cannot reach 0.05 with 4 cells: untestable, and the floor is printed
    assert c.verdict == rules.NOT_TESTABLE and c.p_value == pytest.approx(2 / 24)
    assert "2/4! = 0.0833" in c.note
    five = judged(
        tutorial.claim_gain_grows_with_base_pass_at_g(
            _gain_vs_passg(lambda pg: pg, pass_g=(0.0, 0.3, 0.6, 0.8, 0.9))
        )
    )
    assert five.verdict == rules.SUPPORTED and five.p_value == pytest.approx(2 / 120)


def test_4_not_tested_with_two_base_models():
    c = tutorial.claim_gain_grows_with_base_pass_at_g(
        _gain_vs_passg(lambda pg: pg, pass_g=(0.0, 1.0))
    )
    assert c.verdict == rules.NOT_TESTED


# --- 5 ---------------------------------------------------------------------------------------
def _templates(p_other, half_width, margin=0.02, others=("plain_q",)):
    p = [0.5, *(p_other if isinstance(p_other, tuple) else [p_other] * len(others))]
    return make(
        [],
        passk=pd.DataFrame(
            dict(
                model="m",
                template=["plain", *others],
                k=1,
                pass_at_k=p,
                ci_low=[x - half_width for x in p],
                ci_high=[x + half_width for x in p],
                n_problems=64,
            )
        ),
        margin=margin,
    )


@pytest.mark.parametrize(
    ("p_other", "half", "expected"),
    [
        (0.1, 0.05, rules.SUPPORTED),
        (0.5, 0.005, rules.EQUIVALENT),  # every template's interval inside ±0.02
        (0.45, 0.2, rules.INCONCLUSIVE),
    ],
)
def test_5_template_changes_base_pass_at_k(p_other, half, expected):
    c = judged(tutorial.claim_template_changes_base_pass_at_k(_templates(p_other, half)))
    assert c.verdict == expected and c.margin == 0.02
    # "changes" has no opposite direction: no difference is an equivalence, not a contradiction
    assert c.verdict != rules.CONTRADICTED


def test_5_is_not_equivalent_without_a_declared_margin():
    c = judged(tutorial.claim_template_changes_base_pass_at_k(_templates(0.5, 0.005, None)))
    assert c.verdict == rules.INCONCLUSIVE and c.margin is None


def test_5_p_value_is_adjusted_once_over_the_claims_and_its_contrasts():
    data = _templates((0.45, 0.48), 0.02, others=("plain_q", "plain_r"))
    five = tutorial.claim_template_changes_base_pass_at_k(data)
    raw = template_contrasts(data.passk)["p"].tolist()
    assert five.p_value == pytest.approx(min(raw)) and len(five.family) == 2
    other = rules.Claim("x", "s", "t", value=1.0, n=6, p_value=0.2, verdict=rules.INCONCLUSIVE)
    judged_five, judged_other = rules.adjudicate([five, other])
    # one Holm family of the three raw p-values: claim 5 takes the smaller of its two
    holm = inference.holm([*raw, 0.2])
    assert judged_five.p_holm == pytest.approx(min(holm[:2]))
    assert judged_other.p_holm == pytest.approx(holm[2])
    # before: the template contrasts' own Holm p, then Holm again over the claims
    twice = inference.holm([min(inference.holm(raw)), 0.2])[0]
    assert judged_five.p_holm < twice


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
    out = template_contrasts(passk)
    assert list(out["model"]) == ["a", "b"]
    assert out["diff"].tolist() == pytest.approx([-0.2, 0.0])
    assert out["p_holm"].iloc[0] == pytest.approx(min(1.0, 2 * out["p"].iloc[0]))


def _decided(value, low, high, p_holm=0.01, margin=0.03, direction=1, null=False, half90=None):
    """The verdict of a claim with a 95% interval [low, high] (and a 90% one 0.84 as wide)."""
    h90 = (high - low) / 2 * 0.84 if half90 is None else half90
    c = rules.Claim(
        "x", "s", "t", value=value, low=low, high=high, low90=value - h90, high90=value + h90,
        n=6, p_holm=p_holm, direction=direction, margin=margin, null=null,
    )  # fmt: skip
    return rules.decide(c)


def test_verdict_rule_supported_equivalent_contradicted_inconclusive():
    assert _decided(0.1, 0.05, 0.15) == (rules.SUPPORTED, "")
    assert _decided(-0.1, -0.15, -0.05, direction=0)[0] == rules.SUPPORTED  # either direction
    # significant and inside the margin: a small, real difference, still supported
    assert _decided(0.01, 0.005, 0.015) == (rules.SUPPORTED, "smaller than the margin ±0.03")
    # not significant, 90% interval inside ±0.03: the predicted effect is not there
    assert _decided(0.0, -0.025, 0.025, p_holm=0.9)[0] == rules.EQUIVALENT
    # against the prediction and beyond the margin: contradicted
    assert _decided(-0.1, -0.15, -0.05)[0] == rules.CONTRADICTED
    # against the prediction, significant, but the interval reaches inside the margin
    verdict, note = _decided(-0.04, -0.07, -0.01)
    assert verdict == rules.INCONCLUSIVE and "opposite" in note and "0.03" in note
    # without a margin (a scale with none) the boundary is 0: significant against = contradicted
    assert _decided(-0.04, -0.07, -0.01, margin=None)[0] == rules.CONTRADICTED
    assert _decided(0.1, -0.05, 0.25, p_holm=0.4)[0] == rules.INCONCLUSIVE


def test_verdict_rule_for_a_claim_of_no_effect():
    # the 90% interval inside ±margin: equivalent (what the claim says)
    assert _decided(0.0, -0.03, 0.03, null=True, direction=0, half90=0.025)[0] == rules.EQUIVALENT
    # a real difference inside the margin is still equivalence, and says so
    verdict, note = _decided(0.01, 0.002, 0.018, null=True, direction=0)
    assert verdict == rules.EQUIVALENT and "small, real" in note
    # beyond the margin on either side: contradicted
    assert _decided(0.1, 0.05, 0.15, null=True, direction=0)[0] == rules.CONTRADICTED
    assert _decided(-0.1, -0.15, -0.05, null=True, direction=0)[0] == rules.CONTRADICTED
    # significant but straddling the margin: not shown beyond it
    verdict, note = _decided(0.04, 0.01, 0.07, null=True, direction=0)
    assert verdict == rules.INCONCLUSIVE and "not shown beyond ±0.03" in note
    assert rules.verdict_text(
        rules.Claim("x", "s", "t", verdict=rules.EQUIVALENT, margin=0.03)
    ) == ("equivalent within ±0.03")


def test_zero_variance_claims_are_not_testable_and_say_why():
    # the same growth in every seed: no variance, no p-value (it used to be p = 0, supported)
    same = _lengths(lambda s: 10, lambda s: 0)
    c = judged(tutorial.claim_std_norm_lengthens_wrong_answers(same))
    assert c.verdict == rules.NOT_TESTABLE and "no variance" in c.note and np.isnan(c.p_value)
    equal = _lengths(lambda s: 0, lambda s: 0)
    equal = judged(tutorial.claim_std_norm_lengthens_wrong_answers(equal))
    assert equal.verdict == rules.NOT_TESTABLE and "same value in all 6 seeds" in equal.note


def test_claims_are_holm_adjusted_together():
    base = rules.Claim("x", "s", "t", value=1.0, n=6, verdict=rules.INCONCLUSIVE)
    a, b = rules.adjudicate([replace(base, p_value=0.03), replace(base, p_value=0.04)])
    # alone each would be supported; Holm: 2 x 0.03 = 0.06, then max(0.06, 0.04) = 0.06
    assert a.p_holm == pytest.approx(0.06) and b.p_holm == pytest.approx(0.06)
    assert a.verdict == b.verdict == rules.INCONCLUSIVE
    untested = rules.Claim("y", "s", "t", verdict=rules.NOT_TESTED)
    assert rules.adjudicate([untested, replace(base, p_value=0.03)])[1].p_holm == 0.03
