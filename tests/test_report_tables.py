"""The headline: seed-level contrasts with Holm and power, equal-token contrasts, A/A rows, the
arm-configuration and survival tables, findings, and how numbers are printed — on in-memory
studies whose numbers can be checked by hand."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy import stats as sps

from ablate.baselines import baseline
from ablate.report.claims import sentences as fd
from ablate.report.render import configuration, formats, headline, survival
from ablate.report.render.tables import build_tables
from ablate.report.stats import contrasts as cx
from ablate.report.stats import inference
from ablate.report.stats import measures as m
from ablate.testing import study_data

REF = dataclasses.replace(baseline("grpo"), kl_coef=0.0, minibatches=4)
ALGOS = {
    "grpo": REF,
    "better": dataclasses.replace(REF, clip_high=0.28),
    "noise": dataclasses.replace(REF, scale="none"),
    "dapo": baseline("dapo"),
    "grpo_again": REF,
}
BASE = [0.50, 0.52, 0.48, 0.51]
LIFT = {
    "grpo": [0, 0, 0, 0],
    "better": [0.10, 0.11, 0.09, 0.10],
    "noise": [0.02, -0.03, 0.01, -0.01],
}


def final(value: float) -> dict:
    return {"eval/pass_at_1": {0: 0.5, 10: value}, "budget/generated_tokens": {10: 10_000}}


def runs(arms=("grpo", "better", "noise"), model="m", seeds=range(4)):
    return [(a, model, s, final(BASE[s] + LIFT[a][s])) for a in arms for s in seeds]


@pytest.fixture
def data():
    return study_data(runs(), algorithms=ALGOS, reference="grpo")


def test_paired_contrasts_by_hand_with_holm_over_the_table(data):
    rows = {r.arm: r for r in cx.headline_contrasts(data)}
    assert set(rows) == {"better", "noise"}
    better, noise = rows["better"], rows["noise"]
    assert better.contrast.diff.value == pytest.approx(0.10)
    assert noise.contrast.diff.value == pytest.approx(-0.0025)
    d = np.array(LIFT["noise"])
    assert better.contrast.sd == pytest.approx(np.std(LIFT["better"], ddof=1))
    p_b = sps.ttest_rel(np.add(BASE, LIFT["better"]), BASE).pvalue
    p_n = sps.ttest_1samp(d, 0.0).pvalue
    assert better.p_holm == pytest.approx(min(1, 2 * p_b))  # smallest p: times m = 2
    assert noise.p_holm == pytest.approx(max(2 * p_b, p_n))
    assert better.significant and not noise.significant
    # power at alpha / m for the family of 2 contrasts
    assert better.family == 2
    # the MDE uses the SD at its one-sided 80% upper confidence bound (3 df here)
    upper = better.contrast.sd * np.sqrt(3 / sps.chi2.ppf(0.2, 3))
    assert better.mde == pytest.approx(inference.mde_paired(upper, 4, alpha=0.025))
    assert better.mde > inference.mde_paired(better.contrast.sd, 4, alpha=0.025)
    # no margin declared: a non-significant contrast is inconclusive, never "equivalent"
    assert (better.verdict, noise.verdict) == ("different", "inconclusive")
    assert better.reading == noise.reading == "fixed problems"  # no per-problem records


def test_a_diverged_trial_is_its_own_outcome_in_the_headline():
    rs = (
        runs(("grpo",))
        + [("better", "m", s, final(BASE[s] + 0.1), "finished") for s in range(3)]
        + [("better", "m", 3, {"eval/pass_at_1": {0: 0.5, 4: 0.6}}, "diverged")]
    )
    data = study_data(rs, algorithms=ALGOS, reference="grpo")
    row = next(r for r in cx.headline_contrasts(data) if r.arm == "better")
    # Δ among the 3 seeds both arms survived; the diverged seed is counted in the rates
    assert row.n == 3 and row.contrast.diff.value == pytest.approx(0.1)
    div = row.divergence
    assert (div.k, div.n, div.ref_k, div.ref_n) == (1, 4, 0, 4) and div.counts == "1/4 vs 0/4"
    assert div.p_value == pytest.approx(sps.boschloo_exact([[1, 0], [3, 4]]).pvalue)
    # hurdle: (1 − 1/4)·mean(survivors of better) − mean(grpo), the old zeros reading's value
    hurdle = 0.75 * np.mean(np.add(BASE[:3], 0.1)) - np.mean(BASE)
    assert div.hurdle.value == pytest.approx(hurdle)
    assert div.hurdle.value == pytest.approx(np.mean([0.1, 0.1, 0.1, -BASE[3]]))
    main = headline.main_table(data)
    cell = next(r for r in main.rows if r["arm"] == "better")
    assert cell["seeds"] == "4/4 (1 diverged)" and cell["diverged"] == "1/4 vs 0/4"
    assert cell["pass@1"].value == pytest.approx(np.mean(np.add(BASE[:3], 0.1)))
    assert cell["hurdle Δ"].value == pytest.approx(hurdle)
    assert cell["p diverged (Holm)"] == pytest.approx(div.p_value)  # one test in the family
    assert "Divergence is its own outcome" in main.caption
    lost = survival.survival_table(data).rows[1]
    assert (lost["diverged"], lost["diverged at step"]) == (1, "4")


def test_a_study_without_divergence_shows_no_divergence_columns(data):
    main = headline.main_table(data)
    assert not {"diverged", "p diverged (Holm)", "hurdle Δ"} & set(main.rows[0])
    assert "Divergence is its own outcome" not in main.caption
    row = next(r for r in cx.headline_contrasts(data) if r.arm == "better")
    assert not row.divergence.any and np.isnan(row.divergence.p_value)  # no event: no test


def test_below_three_seeds_no_interval_no_test_and_no_power(data):
    small = study_data(runs(seeds=range(2)), algorithms=ALGOS, reference="grpo")
    rows = cx.headline_contrasts(small)
    assert all(r.n == 2 and np.isnan(r.contrast.p_value) and np.isnan(r.mde) for r in rows)
    main = formats.to_markdown(headline.main_table(small))
    assert "n=2: too few seeds for an interval" in main and "[" not in main.split("|---|")[1]
    assert "*" not in main.split("|---|")[1]
    assert "verdict different" not in main  # no legend for a mark no row carries


def test_main_table_bolds_and_marks_only_what_is_significant_after_holm(data):
    main = headline.main_table(data)
    text = formats.to_markdown(main)
    better = next(line for line in text.splitlines() if line.startswith("| better"))
    noise = next(line for line in text.splitlines() if line.startswith("| noise"))
    assert "**0.100 [" in better and "]** *" in better
    assert "**" not in noise and " *" not in noise
    assert text.count("**") == 2 + 2  # the caption's bold pair and one bold contrast cell
    assert "* verdict different" in text
    tex = formats.to_latex(main)
    assert tex.count(r"\textbf{") == 1 and "$^*$" in tex


def test_equal_tokens_reads_the_eval_made_on_reaching_the_common_mark():
    curves = [
        {"eval/pass_at_1": {0: 0.5, 10: 0.6, 20: 0.7}, "eval/token_mark": {10: 2e4, 20: 4e4}},
        {
            "eval/pass_at_1": {0: 0.5, 8: 0.55, 16: 0.65, 24: 0.75},
            "eval/token_mark": {8: 2e4, 16: 4e4, 24: 6e4},
        },
    ]
    data = study_data(
        [("grpo", "m", 0, curves[0]), ("better", "m", 0, curves[1])],
        algorithms=ALGOS,
        reference="grpo",
    )
    values, mark, how = m.at_equal_tokens(data, "m", "plain")
    assert mark == 4e4 and "reaching" in how
    assert values.to_dict() == pytest.approx({"t0": 0.7, "t1": 0.65})


def test_equal_tokens_without_a_token_cadence_interpolates_and_says_so():
    tok = "eval/budget_generated_tokens"
    data = study_data(
        [
            ("grpo", "m", 0, {"eval/pass_at_1": {0: 0.4, 10: 0.6}, tok: {0: 0, 10: 1000}}),
            ("better", "m", 0, {"eval/pass_at_1": {0: 0.4, 10: 0.8}, tok: {0: 0, 10: 2000}}),
        ],
        algorithms=ALGOS,
        reference="grpo",
    )
    values, mark, how = m.at_equal_tokens(data, "m", "plain")
    assert mark == 1000 and "interpolated" in how
    assert values.to_dict() == pytest.approx({"t0": 0.6, "t1": 0.6})  # halfway: 0.4 + 0.2


def test_configuration_table_shows_what_each_arm_changes_and_its_compute():
    rs = runs(("grpo",)) + [
        ("dapo", "m", s, {**final(0.5), "budget/generated_tokens": {10: 15_000}}) for s in range(4)
    ]
    data = study_data(rs, algorithms=ALGOS, reference="grpo")
    rows = {r["arm"]: r for r in configuration.config_table(data).rows}
    assert rows["grpo"]["differs from reference"] == "(reference)"
    dapo = rows["dapo"]
    assert "clip_high=0.28" in dapo["differs from reference"]
    assert "minibatches=16" in dapo["differs from reference"]
    assert dapo["updates / rollout"].startswith("16 updates")
    assert dapo["dynamic sampling"] == "yes"
    assert (rows["grpo"]["gen. tokens / step"], dapo["gen. tokens / step"]) == (1000, 1500)
    caveats = " ".join(fd.confound_caveats(data))
    assert "update schedule" in caveats and "1.50× the tokens per step" in caveats


def test_findings_state_effects_with_intervals_and_non_effects_with_their_mde(data):
    found = fd.findings(data, cx.headline_contrasts(data), [], [], [])
    significant = found["Different (primary: equal steps, Holm)"]
    assert len(significant) == 1 and significant[0].startswith("better vs grpo")
    assert "Δ pass@1 = +0.100 [" in significant[0] and "4 seeds" in significant[0]
    (rest,) = found["Inconclusive or not testable"]
    assert "noise vs grpo" in rest and "detects |Δ| ≥" in rest


def test_aa_replicate_is_paired_by_seed_and_a_difference_is_a_calibration_failure():
    independent = [0.49, 0.53, 0.50, 0.47]
    same = runs(("grpo",)) + [("grpo_again", "m", s, final(independent[s])) for s in range(4)]
    data = study_data(same, algorithms=ALGOS, reference="grpo", replicates={"grpo_again": "grpo"})
    assert cx.headline_contrasts(data) == []  # a replicate is never a compared arm
    (row,) = cx.replicate_contrasts(data)
    # the replicate shares its twin's seeds (common random numbers): a paired contrast
    assert row.contrast.test == "paired t" and not row.significant
    assert row.p_holm == pytest.approx(sps.ttest_rel(independent, BASE).pvalue)
    assert fd.aa_sentences([row])[0].startswith("A/A check passed")
    jitter = [0.01, -0.02, 0.0, 0.015]  # a constant shift has no variance, hence no test
    shifted = runs(("grpo",)) + [
        ("grpo_again", "m", s, final(BASE[s] + 0.2 + jitter[s])) for s in range(4)
    ]
    bad = study_data(shifted, algorithms=ALGOS, reference="grpo", replicates={"grpo_again": "grpo"})
    (row,) = cx.replicate_contrasts(bad)
    assert row.significant and "CALIBRATION FAILURE" in fd.aa_sentences([row])[0]
    assert headline.control_table(bad).rows[0]["check"] == "CALIBRATION FAILURE"


@pytest.mark.parametrize(
    ("x", "text"),
    [
        (0.0004, "0.00040"),
        (-0.00002, "−0.000020"),
        (0.0, "0.000"),
        (0.1234, "0.123"),
        (-0.07, "−0.070"),
        (61.621, "61.6"),
        (12345.6, "12,346"),
        (float("nan"), "–"),
    ],
)
def test_numbers_never_print_as_a_bare_zero_nor_in_scientific_notation(x, text):
    assert formats._num(x) == text


def test_whole_report_tables_from_memory(data):
    built = build_tables(data)
    names = [t.name for t in built.tables]
    assert names[:4] == ["headline", "configuration", "main", "equal_tokens"]
    assert "controls" not in names  # no replicate arm and no positive control in this study
    assert built.findings["Different (primary: equal steps, Holm)"][0].startswith("better vs")


def test_curve_bands_are_the_t_interval_clipped_to_the_measure_range_and_need_three_seeds():
    import pandas as pd

    from ablate.report.render.figures import _band

    wide = pd.DataFrame({0: [0.90, 0.2], 1: [0.99, 0.3], 2: [0.97, None]}, index=[10, 20])
    mean, low, high = _band(wide, (0.0, 1.0))
    t = inference.t_interval(np.array([0.90, 0.99, 0.97]))
    assert mean[0] == pytest.approx(t.value) and low[0] == pytest.approx(t.low)
    assert t.high > 1 and high[0] == 1.0  # clipped to the range of pass@1
    assert np.isnan(low[1]) and np.isnan(high[1])  # step 20 has 2 seeds: no band


def test_pass_intervals_are_clipped_to_0_1_and_small_n_is_compact_in_secondary_tables():
    from ablate.report.render import secondary

    high = [0.90, 0.99, 0.97]
    rs = [("grpo", "m", s, final(high[s])) for s in range(3)]
    rs += [("better", "m", s, final(0.5)) for s in range(2)]
    data = study_data(rs, algorithms=ALGOS, reference="grpo")
    main = headline.main_table(data)
    grpo = main.rows[0]["pass@1"]
    assert inference.t_interval(np.array(high)).high > 1 and grpo.high == 1.0
    measures = formats.to_markdown(secondary.measures_table(data))
    better = next(line for line in measures.splitlines() if line.startswith("| better"))
    assert "(n=2)" in better and "too few" not in better
    assert "(n=k): only k < 3 seeds, too few for an interval" in measures


def test_tiny_p_values_keep_their_digits_and_zero_signal_prints_as_zero():
    import pandas as pd

    from ablate.report.render import secondary

    assert formats._text(1.1e-94, column="p (Holm)") == "< 1e-6"  # floored: no test says less
    assert formats._text(3.2e-4, column="p") == "0.00032"
    passk = pd.DataFrame(
        dict(
            model="m",
            template="plain",
            k=1,
            pass_at_k=0.5,
            ci_low=0.4,
            ci_high=0.6,
            n_problems=64,
            pass_hat_k=0.5,
            signal_fraction=-2.3e-17,
        ),
        index=[0],
    )
    data = study_data([], algorithms=ALGOS, reference="grpo", passk=passk)
    row = secondary.base_table(data).rows[0]
    assert formats._text(row["signal"]) == "0.000"


def test_the_tables_registry_declares_each_table_once_in_the_reports_order(data):
    from ablate.report.data.table import Table, TableSpec
    from ablate.report.render.sections import SECTIONS
    from ablate.report.render.tables import TABLES, _registry

    assert [s.name for s in TABLES] == [
        "headline",
        "configuration",
        "took_effect",
        "offpolicy_diagnostics",
        "main",
        "sequential",
        "elicited_base",
        "controls",
        "robustness",
        "robustness_recipes",
        "variance_budget",
        "compute_curves",
        "compute_curve_contrasts",
        "equal_tokens",
        "best_checkpoint",
        "survival",
        "incomplete",
        "measures",
        "outcomes",
        "survivors",
        "claims",
        "analytic",
        "dynamics",
        "base",
        "templates",
    ]
    for section in SECTIONS:  # headings for people: never the identifier, no snake_case
        heading = section.heading
        assert heading and heading != section.name and "_" not in heading, section.name
    with pytest.raises(ValueError, match="same name: \\['headline'\\]"):
        _registry(TABLES, TABLES[:1])
    extra = TableSpec(name="x", build=lambda d: Table("X.", [{"a": 1}]))
    table = extra.make(data, "X")
    assert (table.name, table.title, table.rows) == ("x", "X", [{"a": 1}])


def test_the_headline_reads_the_final_checkpoint_never_the_best_and_says_so():
    # every seed of "peaked" is best at step 5 (0.9) and ends at step 10 below the reference
    peaked = {"eval/pass_at_1": {0: 0.5, 5: 0.9, 10: 0.4}, "budget/generated_tokens": {10: 10_000}}
    rs = runs(("grpo",)) + [("peaked", "m", s, peaked) for s in range(4)]
    data = study_data(rs, algorithms={**ALGOS, "peaked": ALGOS["noise"]}, reference="grpo")
    main = headline.main_table(data)
    cell = next(r for r in main.rows if r["arm"] == "peaked")
    assert cell["pass@1"].value == pytest.approx(0.4)
    assert cell["Δ pass@1"].value == pytest.approx(0.4 - np.mean(BASE))
    assert headline.CHECKPOINT_RULE in main.caption


def test_an_arm_whose_every_trial_failed_is_reported_beside_one_with_per_problem_records():
    """The reference has per-problem eval records, the other arm (every trial failed) none: the
    report is built, and the failed arm's contrast holds no number."""
    from ablate.factors.algorithms import Algorithm
    from ablate.report.render.tables import build_tables

    algos = {"grpo": Algorithm(), "dapo": Algorithm(clip_high=0.28)}
    runs = [
        ("grpo", "m", 0, {"eval/pass_at_1": [0.2, 0.5]}),
        ("dapo", "m", 0, {"eval/pass_at_1": [0.2]}, "failed"),
    ]
    data = study_data(
        runs, algorithms=algos, reference="grpo", samples={("grpo", 0): [[1, 0], [0, 1]]}
    )
    main = next(t for t in build_tables(data).tables if t.name == "main")
    dapo = next(r for r in main.rows if r["arm"] == "dapo")
    assert dapo["Δ pass@1"].n == 0 and np.isnan(dapo["Δ pass@1"].value)
