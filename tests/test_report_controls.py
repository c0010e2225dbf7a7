"""The report's controls with declared effects: each control's MDE and its probability of
detection at the effect the study declared for it, beside its contrast; the graded control's
own family; on in-memory studies."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy import stats as sps

from ablate.baselines import baseline
from ablate.report.claims import sentences
from ablate.report.data import numbers
from ablate.report.render import forest, headline
from ablate.report.stats import contrasts as cx
from ablate.report.stats import controls as ctl
from ablate.report.stats import crossed
from ablate.report.stats.design import upper_factor
from ablate.testing import study_data

REF = dataclasses.replace(baseline("grpo"), kl_coef=0.0, minibatches=4)
ALGOS = {
    "grpo": REF,
    "other": dataclasses.replace(REF, scale="none"),
    "random": dataclasses.replace(REF, reward_control="random"),
    "noisy": dataclasses.replace(REF, reward_control="noisy", reward_noise_fraction=0.5),
}
J, K = 64, 4


def make(shift: dict[str, float], seeds=range(4), **fields):
    """Arms shifted from the reference on every problem, with a seed effect per arm and run."""
    rng = np.random.default_rng(11)
    problems = rng.uniform(0.2, 0.8, J)
    runs, samples = [], {}
    for arm, lift in shift.items():
        for s in seeds:
            rate = np.clip(problems + lift + rng.normal(0, 0.02), 0, 1)
            samples[(arm, s)] = (rng.random((J, K)) < rate[:, None]).astype(int)
            runs.append((arm, "m", s, {"eval/pass_at_1": {0: 0.5, 10: float(rate.mean())}}))
    return study_data(
        runs, algorithms=ALGOS, reference="grpo", samples=samples, eval_samples=K, **fields
    )


def test_detection_at_the_mde_is_the_mdes_power_and_rises_with_the_effect():
    rng = np.random.default_rng(0)
    d = rng.normal(0.05, 0.1, (5, 40)) + rng.normal(0, 0.03, (5, 1))
    mde = cx.mde_task(d, 0.05)
    assert ctl.detection_task(d, mde, 0.05) == pytest.approx(0.8, abs=1e-9)
    assert ctl.detection_task(d, -mde, 0.05) == pytest.approx(0.8, abs=1e-9)  # two-sided
    assert ctl.detection_task(d, 0.5 * mde, 0.05) < 0.8 < ctl.detection_task(d, 1.5 * mde, 0.05)
    # by hand: T_df(|Δ| / sqrt(V) − t_{1 − α/2, df}), V with the seed term at its upper bound
    c = crossed.crossed(d)
    v = c.seed_var * upper_factor(5) / 5 + c.problem_var / 40 + c.resid_var / 200
    expected = sps.t.cdf(0.07 / np.sqrt(v) - sps.t.ppf(0.975, c.df), c.df)
    assert ctl.detection_task(d, 0.07, 0.05) == pytest.approx(float(expected))


def test_each_control_gets_its_mde_and_detection_at_its_declared_effect():
    data = make(
        {"grpo": 0.0, "other": 0.0, "random": -0.3, "noisy": -0.08},
        positive_control="random",
        graded_control="noisy",
        control_effects={"random": -0.25, "noisy": -0.08},
    )
    assert [r.arm for r in cx.headline_contrasts(data)] == ["other"]  # both controls apart
    (positive,), (graded,) = cx.control_contrasts(data), cx.graded_contrasts(data)
    assert (positive.kind, graded.kind) == (cx.CONTROL, cx.GRADED)
    rows = {r["arm"]: r for r in headline.control_table(data).rows}
    assert rows["random"]["control"] == "positive" and rows["noisy"]["control"] == "graded"
    for arm, row, declared in (("random", positive, -0.25), ("noisy", graded, -0.08)):
        shown = rows[arm]
        assert shown["declared Δ"] == declared and shown["MDE 80%"] == row.mde
        p = ctl.detection_task(row.diffs, declared, 0.05)
        assert shown["P(detect) at declared"] == pytest.approx(p)
        assert (
            shown["check"]
            == f"detected (P(detect) {p:.2f} at its declared {numbers.rate(declared, sign=True)})"
        )
    labels = [r.label for r in forest.forest_rows(data)]
    assert "noisy (graded control)" in labels and "random (positive control)" in labels
    said = sentences.control_sentences([positive, graded], data.control_effects)
    graded_line = [line for line in said if line.startswith("Graded control noisy vs grpo")]
    assert len(graded_line) == 1 and graded_line[0].endswith(f"{shown['check']}.")


def test_a_missed_graded_control_is_not_a_failure_and_a_wrong_side_is_flagged():
    data = make(
        {"grpo": 0.0, "random": 0.3, "noisy": 0.0},
        seeds=range(3),
        positive_control="random",
        graded_control="noisy",
        control_effects={"random": -0.25, "noisy": -0.02},
    )
    rows = {r["arm"]: r["check"] for r in headline.control_table(data).rows}
    assert rows["random"] == "DETECTED ON THE WRONG SIDE of its declared −0.25"
    assert rows["noisy"].startswith("not detected (P(detect) 0.")
    # without a declared effect, the positive control reads as before
    plain = make({"grpo": 0.0, "random": 0.0}, seeds=range(3), positive_control="random")
    (row,) = headline.control_table(plain).rows
    assert row["check"] == "NOT DETECTED: underpowered" and row["P(detect) at declared"] is None
