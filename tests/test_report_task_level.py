"""The report's task-level reading: per-(seed, problem) records go through the crossed seed ×
problem analysis; verdicts (different / equivalent / inconclusive); the live controls; the
estimand stated first — on in-memory studies whose numbers can be checked by hand."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ablate.baselines import baseline
from ablate.report.claims import sentences as fd
from ablate.report.render import budget, build, headline, opening
from ablate.report.stats import contrasts as cx
from ablate.report.stats import crossed
from ablate.testing import study_data

REF = dataclasses.replace(baseline("grpo"), kl_coef=0.0, minibatches=4)
ALGOS = {
    "grpo": REF,
    "other": dataclasses.replace(REF, scale="none"),
    "random": dataclasses.replace(REF, reward_control="random"),
    "again": REF,
}
J, K = 40, 4


def outcomes(rate: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """[J, K] 0/1 eval outcomes with per-problem success probability `rate` [J]."""
    return (rng.random((len(rate), K)) < rate[:, None]).astype(int)


def make(shift: dict[str, float], seeds=range(5), tau: float = 0.0, **fields):
    """Arms `shift`ed from the reference on every problem, by a further tau·z_j (an arm × problem
    interaction) on problem j for every arm but the reference."""
    rng = np.random.default_rng(7)
    problems = rng.uniform(0.1, 0.9, J)
    runs, samples = [], {}
    for arm, lift in shift.items():
        z = rng.normal(0, tau, J) if arm != "grpo" else 0.0
        for s in seeds:
            rate = np.clip(problems + lift + z + 0.02 * (s - 2), 0, 1)
            samples[(arm, s)] = outcomes(rate, rng)
            runs.append((arm, "m", s, {"eval/pass_at_1": {0: 0.5, 10: float(rate.mean())}}))
    return study_data(
        runs,
        algorithms=ALGOS,
        reference="grpo",
        samples=samples,
        task="arithmetic",
        eval_samples=K,
        **fields,
    )


def matrix(data, arm: str) -> np.ndarray:
    s = data.samples[data.samples["arm"] == arm]
    table = s.groupby(["seed", "problem_id"])["correct"].mean().unstack()
    return table[sorted(table.columns)].to_numpy(float)


def test_a_contrast_reads_the_per_problem_records_through_the_crossed_analysis():
    data = make({"grpo": 0.0, "other": 0.2}, tau=0.15)
    (row,) = cx.headline_contrasts(data)
    d = matrix(data, "other") - matrix(data, "grpo")
    c = crossed.crossed(d)
    assert (row.reading, row.problems, row.n) == (cx.TASK, J, 5)
    assert row.contrast.diff.value == pytest.approx(float(d.mean()))
    half = float(c.half_width())
    assert row.contrast.diff.high - row.contrast.diff.low == pytest.approx(2 * half)
    assert row.p_holm == pytest.approx(float(c.p_value()))
    assert row.verdict == cx.DIFFERENT
    # the fixed-problem reading is the paired t over the per-seed means, kept beside it
    assert row.fixed.test == "paired t"
    assert row.fixed.diff.value == pytest.approx(float(d.mean()))
    # with an arm × problem interaction the task-level interval is wider: it also counts which
    # problems were drawn
    assert c.problem_var > 0
    assert half > 1.2 * (row.fixed.diff.high - row.fixed.diff.low) / 2


def test_equivalent_only_inside_a_declared_margin_and_inconclusive_without_one():
    same = make({"grpo": 0.0, "other": 0.0}, seeds=range(8))
    (row,) = cx.headline_contrasts(same)
    assert row.verdict == cx.INCONCLUSIVE  # no margin declared: never "equivalent"
    wide = make({"grpo": 0.0, "other": 0.0}, seeds=range(8), equivalence_margin=0.2)
    (row,) = cx.headline_contrasts(wide)
    lo, hi = row.interval90
    assert -0.2 < lo < hi < 0.2 and row.verdict == cx.EQUIVALENT
    # the 90% interval TOST reads is narrower than the reported 95% one
    assert row.contrast.diff.low < lo and hi < row.contrast.diff.high
    narrow = make({"grpo": 0.0, "other": 0.0}, seeds=range(8), equivalence_margin=0.001)
    assert cx.headline_contrasts(narrow)[0].verdict == cx.INCONCLUSIVE


def test_the_positive_control_is_detected_and_the_aa_replicate_passes():
    data = make(
        {"grpo": 0.0, "other": 0.01, "random": -0.3, "again": 0.0},
        replicates={"again": "grpo"},
        positive_control="random",
        equivalence_margin=0.05,
    )
    assert [r.arm for r in cx.headline_contrasts(data)] == ["other"]  # controls apart
    (control,) = cx.control_contrasts(data)
    (aa,) = cx.replicate_contrasts(data)
    assert control.verdict == cx.DIFFERENT and control.contrast.diff.value < -0.2
    assert aa.verdict != cx.DIFFERENT and aa.reading == cx.TASK
    checks = {r["arm"]: r["check"] for r in headline.control_table(data).rows}
    assert checks == {"again": "passed", "random": "detected"}
    text = " ".join(fd.findings(data, cx.headline_contrasts(data), [], [aa], [])["Controls"])
    assert "Positive control detected" in text and "A/A check passed" in text


def test_an_undetected_positive_control_flags_the_study_underpowered():
    data = make({"grpo": 0.0, "random": 0.0}, seeds=range(3), positive_control="random")
    (control,) = cx.control_contrasts(data)
    assert control.verdict != cx.DIFFERENT
    assert headline.control_table(data).rows[0]["check"] == "NOT DETECTED: underpowered"
    assert "UNDERPOWERED" in fd.control_sentences([control])[0]


def test_the_report_states_its_estimand_first():
    data = make({"grpo": 0.0, "other": 0.1})
    summary = build._summary(data)
    assert summary.startswith(f"Estimand: {J} problems of arithmetic's eval split, {K} samples")
    assert "treated as a sample of the task" in summary
    row = next(r for r in headline.main_table(data).rows if r["arm"] == "grpo")
    est = crossed.estimate(matrix(data, "grpo"))
    assert row["pass@1"].value == pytest.approx(est.value)
    assert row["pass@1"].low == pytest.approx(est.low)


def test_without_per_problem_records_the_reading_is_labelled_fixed():
    runs = [
        (a, "m", s, {"eval/pass_at_1": {10: 0.5 + 0.1 * (a == "other") + 0.01 * s}})
        for a in ("grpo", "other")
        for s in range(3)
    ]
    data = study_data(runs, algorithms=ALGOS, reference="grpo")
    (row,) = cx.headline_contrasts(data)
    assert row.reading == cx.FIXED and row.problems == 0
    assert opening.estimand(data).startswith("Estimand: the study's eval problems as fixed")


def test_the_variance_budget_splits_each_arms_per_seed_variance():
    data = make({"grpo": 0.0, "other": 0.1}, seeds=range(6))
    rows = {r["arm"]: r for r in budget.budget_table(data).rows}
    y = matrix(data, "grpo")
    total = np.var(y.mean(axis=1), ddof=1)
    # K = 4 Bernoulli samples per problem: unbiased per-cell noise ŷ(1 − ŷ)/(K − 1), over J
    noise = np.mean((y * (1 - y)).mean(axis=1) / (K - 1) / J)
    row = rows["grpo"]
    assert row["seeds × problems × samples"] == f"6 × {J} × {K}"
    assert row["per-seed SD"] == pytest.approx(np.sqrt(total))
    assert row["eval noise SD"] == pytest.approx(np.sqrt(noise))
    assert row["eval share"] == pytest.approx(min(1.0, noise / total))
    assert row["training SD"] == pytest.approx(np.sqrt(max(0.0, total - noise)))


def test_a_sequential_design_gives_the_verdicts_and_its_looks_are_tabled():
    data = make(
        {"grpo": 0.0, "other": 0.3, "again": 0.0},
        seeds=range(6),
        looks=(3, 6),
        equivalence_margin=0.2,
        replicates={"again": "grpo"},
    )
    rows = {r.arm: r for r in cx.headline_contrasts(data)}
    assert set(rows) == {"other"}  # the replicate is a control, not in the primary family
    assert rows["other"].verdict == cx.DIFFERENT and rows["other"].note.startswith("look 1 of 2")
    assert "verdict of the sequential design at look 1 of 2" in fd.contrast_sentence(rows["other"])
    table = headline.sequential_table(data).rows
    assert [(r["contrast"], r["look"], r["verdict"]) for r in table] == [
        ("other − grpo", 1, "different")
    ]
    assert table[0]["seeds"] == "3 of 3" and table[0]["p"] < table[0]["nominal level"]
    # without looks, the same data gets the fixed design's verdict over all 6 seeds
    fixed = make({"grpo": 0.0, "other": 0.3}, seeds=range(6))
    assert cx.headline_contrasts(fixed)[0].note == "final eval"
