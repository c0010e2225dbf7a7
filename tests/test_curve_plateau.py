"""A plateau must be seen before A is shown (`curves.curvature`): the seeds' change of slope
per decade by hand, the one-sided t by hand, a straight line in log compute against a curve
that bends, the report's wording, and the calibration's curves that ScaleRL's sigmoid does not
describe (`curve_model`: a line in log compute, two phases), their truths checked by hand."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ablate.factors.eval_spec import CurveSpec
from ablate.report.curves import curvature as cv
from ablate.report.curves import section
from ablate.report.curves.analysis import ArmCurves, TrialCurve, TrialFit
from ablate.report.curves.fit import Fit, sigmoid
from ablate.report.curves.pooled import pooled_fit, unidentified
from ablate.report.curves.reach import slope_per_decade
from ablate.report.render import figures
from devtools.calibration.curve_model import (
    STUDY_SCHEDULE,
    CurveModel,
    _draw,
    mean_curve,
    simulate_seed,
    truths,
)

X = np.arange(0, 25) * 0.25  # log10 compute 0, 0.25, ..., 6
C = 10.0**X
STUDY = STUDY_SCHEDULE[STUDY_SCHEDULE > 50_000]


def test_the_stretches_are_the_last_share_of_the_log_compute_and_the_share_before_it():
    (low, cut), (cut2, high) = cv.stretches(1.0, 1e6, 1 / 3, 2 / 3)
    assert cut == cut2 == pytest.approx(1e4) and high == pytest.approx(1e6)
    assert low < 1.0 < low * 1.0001  # the first eval belongs to the stretch before
    (low, cut), _ = cv.stretches(1.0, 1e6, 1 / 5, 1 / 5)
    assert (np.log10(low), np.log10(cut)) == pytest.approx((3.6, 4.8))


def test_the_change_of_slope_by_hand():
    # levelled: slope 0.1 per decade to log compute 4, flat after; the last third is (4, 6]
    levelled = 0.1 * np.minimum(X, 4.0)
    assert cv.slope_change(C, levelled, 1.0, 1e6, 1 / 3, 2 / 3) == pytest.approx(-0.1)
    # bending: 0.1 per decade to 4.8, then 0.02; the last fifth is (4.8, 6], before it (3.6, 4.8]
    bending = np.where(X <= 4.8, 0.1 * X, 0.48 + 0.02 * (X - 4.8))
    assert cv.slope_change(C, bending, 1.0, 1e6, 1 / 5, 1 / 5) == pytest.approx(-0.08)
    # a straight line in log compute changes slope nowhere, whatever its slope
    for slope in (0.0, 0.05, 0.3):
        for share, before in ((1 / 3, 2 / 3), (1 / 5, 1 / 5)):
            line = 0.5 + slope * X
            assert cv.slope_change(C, line, 1.0, 1e6, share, before) == pytest.approx(
                0.0, abs=1e-12
            )
    # a stretch with fewer than MIN_WINDOW_POINTS evals has no slope
    sparse = C[[0, 10, 20, 22, 24]]
    assert np.isnan(cv.slope_change(sparse, 0.1 * np.log10(sparse), 1.0, 1e6, 1 / 5, 1 / 5))


def test_the_one_sided_paired_t_by_hand():
    d = np.array([-0.1, -0.2, -0.15])  # mean -0.15, SD 0.05
    t = -0.15 / (0.05 / np.sqrt(3))
    assert cv.shallower_p(d) == pytest.approx(0.5 + t / (2 * np.sqrt(t * t + 2)))  # t CDF, 2 df
    assert cv.shallower_p(-d) == pytest.approx(1 - cv.shallower_p(d))
    assert cv.shallower_p(np.full(3, -0.05)) == 0.0 and cv.shallower_p(np.zeros(4)) == 1.0
    assert np.isnan(cv.shallower_p(d[:2])) and np.isnan(cv.shallower_p(np.array([-1, np.nan, -1])))


def _arm(curve, noise: float = 0.0, seeds: int = 3) -> dict:
    rng = np.random.default_rng(4)
    return {s: (STUDY, curve + rng.normal(0, noise, len(STUDY)), 0.52) for s in range(seeds)}


@pytest.mark.parametrize("noise", [0.0, 0.003])
def test_a_straight_line_in_log_compute_over_three_seeds_shows_no_plateau(noise):
    """The fit's rules alone accept it (A below 1, midpoint inside, B in range): the sigmoid
    bends where the line does not; the seeds' slopes say so."""
    fit = pooled_fit(_arm(0.52 + 0.08 * np.log10(STUDY / 1e4), noise))
    assert unidentified(dataclasses.replace(fit, bend=None)) == "" and fit.params[0] < 0.9
    assert not fit.identified and fit.unidentified.startswith(cv.NO_PLATEAU)
    assert not fit.bend.seen and fit.bend.p > 0.05 and abs(fit.bend.change.value) < 0.01
    assert fit.shape_unidentified == fit.unidentified  # nor B or C_mid


def test_a_curve_that_levels_off_within_the_compute_shows_its_plateau():
    fit = pooled_fit(_arm(sigmoid(STUDY, 0.85, 1.5, 300_000.0, 0.52), 0.003))
    assert fit.identified, fit.unidentified
    assert fit.bend.p < 0.05 and fit.bend.change.high < 0
    assert fit.params[0] == pytest.approx(0.85, abs=0.01)


def test_fewer_than_three_seeds_cannot_show_a_bend():
    fit = pooled_fit(_arm(sigmoid(STUDY, 0.85, 1.5, 300_000.0, 0.52), 0.003, seeds=2))
    assert not fit.identified and "there are 2 (needs 3)" in fit.unidentified
    # the fit itself is fine: without the test, its rules identify it
    assert pooled_fit(
        _arm(sigmoid(STUDY, 0.85, 1.5, 300_000.0, 0.52), seeds=2), bend=False
    ).identified


SPEC = CurveSpec(warmup=50_000, target=None)


def _arm_curves(name: str, by_seed: dict) -> ArmCurves:
    fits = [
        TrialFit(
            TrialCurve(f"{name}{s}", name, s, c, r, r0, c * np.nan),
            Fit(),
            None,
            np.nan,
            slope_per_decade(c, r),
        )
        for s, (c, r, r0) in by_seed.items()
    ]
    return ArmCurves(name, fits, pooled_fit(by_seed))


def test_the_report_words_a_shown_a_as_a_plateau_suggested_and_says_when_none_is_seen():
    bends = _arm_curves("bends", _arm(sigmoid(STUDY, 0.85, 1.5, 300_000.0, 0.52), 0.003))
    line = _arm_curves("line", _arm(0.52 + 0.08 * np.log10(STUDY / 1e4), 0.003))
    said = section.sentences([bends, line], [])
    assert said[0].startswith(f"bends: {section.PLATEAU}, A = 0.85")
    assert line.slope().value == pytest.approx(0.08, abs=0.005)  # what a line does: its slope
    assert said[1].startswith("line: gains 0.0") and f"A not reported ({cv.NO_PLATEAU}" in said[1]
    assert section.PLATEAU not in said[1]
    cells = {r["arm"]: r["A identified"] for r in section.curves_table([bends, line], SPEC).rows}
    assert cells["bends"] == f"yes: {section.PLATEAU}"
    assert cells["line"].startswith(
        f"no: {cv.NO_PLATEAU}: the slope per decade over the last third"
    )
    plt = figures._plt()
    fig, ax = plt.subplots()
    for arm in (bends, line):
        curves = [t.curve for t in arm.fits]
        section._fitted(ax, arm, curves, SPEC, "C0", arm.arm)
    labels = [h.get_label() for h in ax.get_lines()]
    plt.close(fig)
    assert labels[0].startswith(f"bends: {section.PLATEAU}, A=0.85") and ", B=1." in labels[0]
    assert labels[1] == f"line: A not identified: {cv.NO_PLATEAU}"


def test_a_line_in_log_compute_is_r0_then_its_slope_per_decade():
    model = CurveModel(shape="log-linear", slope=0.1, c_start=1e4)
    truth = np.array([0.85, 1.2, 1e6, 3e6, 0.1])  # a seed's draws: only the slope counts
    got = mean_curve(model, truth, np.array([1e3, 1e4, 1e5, 1e7]))
    assert got == pytest.approx([0.52, 0.52, 0.62, 0.82])
    t = truths(model)
    assert np.isnan(t["a"]) and np.isnan(t["a final"]) and np.isnan(t["b"])
    # the mean slope per decade over the observed compute: the seeds' mean slope
    draws = _draw(model, np.random.default_rng(12345), 4000)
    assert t["slope"] == pytest.approx(draws[:, 4].mean(), rel=1e-9)
    assert draws[:, 4].mean() == pytest.approx(0.1 * np.exp(0.15**2 / 2), rel=0.02)


def test_two_phases_are_the_sigmoid_plus_a_second_rise_and_their_truth_is_the_plateau_seen():
    first = CurveModel(a=0.75, b=1.5, c_mid=2e5)
    after = dataclasses.replace(first, shape="two-phase", gain2=0.12, c_mid2=6e7)
    truth = np.array([0.75, 1.5, 2e5, 6e7, 0.12])
    c = np.array([2e5, 6e7])
    expected = [0.52 + 0.23 / 2, 0.52 + 0.23 / (1 + 300**-1.5) + 0.12 / 2]
    assert mean_curve(after, truth, c) == pytest.approx(expected)
    # the second rise adds 0.12 / (1 + 10^2.5) < 0.005 by 6M: the plateau seen is the first
    t = truths(after)
    assert t["a"] == 0.75 and t["a final"] == pytest.approx(0.87)
    within = truths(dataclasses.replace(after, c_mid2=3e6))
    assert within["a"] == within["a final"] == pytest.approx(0.87)
    # the shapes share the sigmoid's draws, so a scenario changes only what it adds
    rng = (np.random.default_rng(5), np.random.default_rng(5))
    assert np.array_equal(_draw(first, rng[0], 6)[:, :3], _draw(after, rng[1], 6)[:, :3])


def test_a_noise_free_simulated_seed_is_its_expected_curve():
    quiet = dict(wander_sd=0.0, evals=10**12, a_sd=0.0, log_sd=0.0)
    for model in (
        CurveModel(shape="log-linear", **quiet),
        CurveModel(shape="two-phase", gain2=0.1, c_mid2=2e6, **quiet),
    ):
        c, r, r0, truth = simulate_seed(model, np.random.default_rng(0))
        assert r0 == pytest.approx(0.52, abs=1e-5)
        assert r == pytest.approx(mean_curve(model, truth, c), abs=1e-5)


def test_the_adversarial_gates_hold_at_a_small_size():
    """`adversarial_gates` at 30 studies (the lead's `calibrate --adversarial` runs it larger):
    the fit's rules alone would show a plateau on ~55% of lines in log compute, far above the
    gate's 5% + 3 Monte-Carlo errors."""
    from devtools.calibration.curve_calibration import adversarial_gates

    gates = adversarial_gates(30)
    assert len(gates) == 8 and all(g.name.startswith("curves: ") for g in gates)
    assert all(g.passed for g in gates), [g.line() for g in gates if not g.passed]
