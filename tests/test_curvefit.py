"""ScaleRL's sigmoid fit and its checks, on hand-checkable values and on curves simulated from
known (A, B, C_mid) plus noise.

The recovery tolerance, derived: a least-squares fit on n points with independent noise of SD σ
estimates θ = (A, ln B, ln C_mid) with covariance σ²(JᵀJ)⁻¹ to first order (J: the model's
Jacobian at the truth, `curves.check.standard_errors`). A recovered parameter must lie within
5 standard errors of the truth, plus half a grid step where the fit is on a grid (A: 0.0025;
ln C_mid: half the log spacing of the C_mid grid). Under that normal approximation a 5-SE miss has
probability 6e-7 per parameter; the approximation itself is checked against 200 simulated
curves (`test_the_linearised_standard_errors_match_the_simulated_spread`, slow: the observed
spread stays within 1.3× the linearised SE, measured 1.11× for A at σ = 0.005)."""

from __future__ import annotations

import numpy as np
import pytest

from ablate.report.curves.check import (
    arm_forecast,
    fit_power_law,
    jacobian,
    standard_errors,
    window_spread,
    windows,
)
from ablate.report.curves.fit import (
    A_STEP,
    C_MID_POINTS,
    Fit,
    a_grid,
    c_mid_grid,
    compute_to_reach,
    fit_sigmoid,
    sigmoid,
)
from ablate.report.curves.pooled import pooled_fit
from devtools.calibration.curve_model import STUDY_SCHEDULE, schedule

C = STUDY_SCHEDULE[STUDY_SCHEDULE > 50_000]  # the study's evals after its warm-up
TRUTHS = [  # (A, B, C_mid, R0)
    (0.66, 1.5, 250_000.0, 0.52),
    (0.80, 2.5, 150_000.0, 0.30),
    (0.58, 1.2, 300_000.0, 0.45),
]
SIGMA = 0.005


def noisy(truth, seed: int, sigma: float = SIGMA, c: np.ndarray = C) -> np.ndarray:
    a, b, c_mid, r0 = truth
    return sigmoid(c, a, b, c_mid, r0) + np.random.default_rng(seed).normal(0, sigma, len(c))


def test_sigmoid_and_its_inverse_by_hand():
    # at C = C_mid half the gain; C_mid / C = 1/2 with B = 2: gain / (1 + 1/4)
    assert sigmoid(100.0, 0.7, 2.0, 100.0, 0.5) == pytest.approx(0.6)
    assert sigmoid(200.0, 0.7, 2.0, 100.0, 0.5) == pytest.approx(0.5 + 0.2 / 1.25)
    assert sigmoid(1e12, 0.7, 2.0, 100.0, 0.5) == pytest.approx(0.7)
    assert compute_to_reach(0.66, 0.7, 2.0, 100.0, 0.5) == pytest.approx(200.0)
    assert compute_to_reach(0.6, 0.7, 2.0, 100.0, 0.5) == pytest.approx(100.0)
    assert compute_to_reach(0.45, 0.7, 2.0, 100.0, 0.5) == 0.0
    assert compute_to_reach(0.7, 0.7, 2.0, 100.0, 0.5) == float("inf")


def test_the_grids_by_hand():
    a = a_grid(0.52)
    assert a[0] == pytest.approx(0.525) and a[-1] == pytest.approx(1.0) and len(a) == 96
    assert a_grid(0.5)[0] == pytest.approx(0.505)  # strictly above R0
    assert np.allclose(np.diff(a), A_STEP)
    cm = c_mid_grid(np.array([1000.0, 5000.0]))
    assert cm[0] == pytest.approx(100.0) and cm[-1] == pytest.approx(8 * 5000.0)  # past the data
    assert len(cm) == C_MID_POINTS
    assert windows(10.0, 100.0, 3.0) == [(10, 100), (5, 100), (20, 100), (10, 75)]
    assert windows(0.0, 100.0, 3.0) == [(0, 100), (3, 100), (0, 75)]


def test_the_jacobian_matches_finite_differences():
    fit = Fit(0.66, 1.5, 250_000.0, 0.52)
    h = 1e-6
    for k, bump in enumerate(
        [
            lambda d: Fit(0.66 + d, 1.5, 250_000.0, 0.52),
            lambda d: Fit(0.66, 1.5 * np.exp(d), 250_000.0, 0.52),  # ∂/∂ln B = B·∂/∂B
            lambda d: Fit(0.66, 1.5, 250_000.0 * np.exp(d), 0.52),
        ]
    ):
        numeric = (bump(h).predict(C) - bump(-h).predict(C)) / (2 * h)
        analytic = jacobian(C, fit)[:, k] * (1.5 if k == 1 else 1.0)
        assert np.allclose(numeric, analytic, atol=1e-7), k


@pytest.mark.parametrize("truth", TRUTHS)
def test_known_curves_are_recovered_within_the_derived_tolerance(truth):
    a, b, c_mid, r0 = truth
    se_a, se_log_b, se_log_c = standard_errors(C, Fit(a, b, c_mid, r0), SIGMA)
    grid = c_mid_grid(C)
    half_log_step = np.log(grid[1] / grid[0]) / 2
    for seed in range(8):
        fit = fit_sigmoid(C, noisy(truth, seed), r0)
        assert fit.ok, fit.reason
        assert abs(fit.a - a) <= 5 * se_a + A_STEP / 2
        assert abs(np.log(fit.b / b)) <= 5 * se_log_b
        assert abs(np.log(fit.c_mid / c_mid)) <= 5 * se_log_c + half_log_step


@pytest.mark.slow
def test_the_linearised_standard_errors_match_the_simulated_spread():
    truth = TRUTHS[0]
    fits = [fit_sigmoid(C, noisy(truth, 1000 + s), truth[3]) for s in range(200)]
    got = np.array([[f.a, np.log(f.b), np.log(f.c_mid)] for f in fits if f.ok])
    assert len(got) >= 195
    se = standard_errors(C, Fit(*truth), SIGMA)
    ratio = got.std(axis=0) / se
    assert (ratio <= 1.3).all(), ratio


def test_too_few_points_give_no_fit():
    fit = fit_sigmoid(C[:4], noisy(TRUTHS[0], 0)[:4], 0.52)
    assert not fit.ok and fit.reason == "no fit: 4 points after the warm-up (needs at least 5)"
    assert np.isnan(fit.a)


@pytest.mark.parametrize("seed", range(5))
def test_flat_curves_give_no_fit(seed):
    flat = 0.55 + np.random.default_rng(seed).normal(0, 0.015, len(C))
    fit = fit_sigmoid(C, flat, 0.52)
    assert not fit.ok and "no fit: " in fit.reason and np.isnan(fit.a)


@pytest.mark.parametrize("seed", range(5))
def test_non_monotone_curves_give_no_fit(seed):
    """A rise to 0.69 by 200k tokens, then a fall back towards the start."""
    rise = sigmoid(C, 0.7, 3.0, 120_000.0, 0.52)
    fall = 0.12 * np.clip(np.log(C / 250_000.0), 0, None)
    r = rise - fall + np.random.default_rng(seed).normal(0, 0.01, len(C))
    fit = fit_sigmoid(C, r, 0.52)
    assert fit.reason.startswith("no fit: the curve falls as compute grows"), fit.reason


def test_a_curve_that_has_not_bent_is_not_identified_by_the_arm():
    """C_mid 2.5× past the last eval: the data show the start of a rise, not its bend."""
    r = noisy((0.9, 2.0, 15_000_000.0, 0.3), 0, sigma=0.003)
    fit = pooled_fit({0: (C, r, 0.3), 1: (C, noisy((0.9, 2.0, 15_000_000.0, 0.3), 1, 0.003), 0.3)})
    assert not fit.identified
    assert "not levelled off" in fit.unidentified or "not bracketed" in fit.unidentified


def test_a_measured_curve_still_rising_at_the_end_reports_no_a():
    """A measured curve (GRPO, seed 0, on rl_ready, 3M generated tokens, lr 3e-5): still rising
    at the end, so its asymptote is not identified (the old per-seed grid put A at its bound)."""
    c = 1000.0 * np.array([64, 114, 202, 252, 358, 500, 633, 751, 1001, 1126, 1252, 1501])
    c = np.concatenate([c, 1000.0 * np.array([1750, 2001, 2251, 2501, 2752, 3001])])
    r = [0.549, 0.581, 0.577, 0.599, 0.643, 0.645, 0.618, 0.609, 0.646, 0.684, 0.672, 0.741]
    r = np.array([*r, 0.738, 0.759, 0.737, 0.727, 0.786, 0.823])
    fit = pooled_fit({0: (c, r, 0.515)})
    assert not fit.identified, fit.params


def _arm(truths_and_seeds, late_rise: float = 0.0):
    out = {}
    for s, truth in truths_and_seeds:
        r = noisy(truth, s)
        late = np.greater(C, C.max() / 2)
        out[s] = (C, r + np.where(late, late_rise * (C / C.max() - 0.5) / 0.5, 0.0), truth[3])
    return out


def test_the_arm_forecast_holds_for_curves_that_keep_to_their_law():
    """At the nominal rate: 30 arms of 4 seeds, at most 4 departures (P < 0.06 at 5%)."""
    got = [arm_forecast(_arm([(s + 4 * k, TRUTHS[0]) for s in range(4)])) for k in range(30)]
    assert all(not f.reason and f.error.n == 4 and f.rmse < 3 * SIGMA for f in got)
    assert sum(f.departs for f in got) <= 4


def test_the_arm_forecast_departs_when_every_seed_climbs_on_in_the_second_half():
    f = arm_forecast(_arm([(s, TRUTHS[0]) for s in range(4)], late_rise=0.1))
    assert f.departs and f.error.value > 0.03 and f.rmse > 0.03, f


def test_power_law_recovers_a_power_law_and_hits_its_bound_on_a_linear_rise():
    c = schedule(1000, 4, 10_000, 100_000)
    law = 0.8 - 0.3 * (c / c.min()) ** -0.5
    fit = fit_power_law(c, law)
    assert fit.a == pytest.approx(0.8) and fit.b == pytest.approx(0.5, rel=0.03)
    assert not fit.at_bound
    rising = 0.3 + 0.5 * np.log10(c / c.min()) / np.log10(c.max() / c.min())  # never bends
    assert fit_power_law(c, rising).at_bound


def test_window_spread_is_small_for_clean_curves_and_nan_when_a_is_not_identified():
    c = STUDY_SCHEDULE
    clean = {s: (c, noisy(TRUTHS[0], s, c=c), 0.52) for s in range(3)}
    assert 0 <= window_spread(clean, 50_000.0) < 0.02
    rng = np.random.default_rng(0)
    flat = {s: (c, 0.55 + rng.normal(0, 0.015, len(c)), 0.52) for s in range(3)}
    assert np.isnan(window_spread(flat, 50_000.0))


def test_the_arm_forecast_gives_no_verdict_when_a_leave_one_out_half_is_not_identified():
    """One seed rises and levels off, the other stays flat: together the first half identifies
    the curve, the flat seed alone does not, so the jackknife has no interval and the check
    says so instead of "holds" with an interval of NaN."""
    c = STUDY_SCHEDULE[STUDY_SCHEDULE > 50_000]
    flat = 0.52 + np.random.default_rng(0).normal(0, 0.005, len(c))
    f = arm_forecast({0: (c, sigmoid(c, 0.85, 2.0, 3e5, 0.52), 0.52), 1: (c, flat, 0.52)})
    assert f.error is None and not f.departs
    assert f.reason == "the first half without one of the seeds does not identify the curve"
