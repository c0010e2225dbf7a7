"""What a curve identifies without an asymptote (`curves.reach`) and the arm's pooled fit
(`curves.pooled`), on values checked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from ablate.report.curves.fit import sigmoid
from ablate.report.curves.pooled import MARGIN, pooled_fit
from ablate.report.curves.reach import first_reach, isotonic, restricted_log, slope_per_decade


def test_isotonic_pools_adjacent_violators_by_hand():
    assert np.allclose(isotonic(np.array([1.0, 3.0, 2.0, 4.0])), [1, 2.5, 2.5, 4])
    assert np.allclose(isotonic(np.array([3.0, 2.0, 1.0])), [2, 2, 2])
    assert np.allclose(isotonic(np.array([0.1, 0.2, 0.3])), [0.1, 0.2, 0.3])


def test_first_reach_interpolates_on_log_compute_and_censors_by_hand():
    c = np.array([10.0, 100.0, 1000.0])
    # target 0.6 halfway between 0.5 (at 10) and 0.7 (at 100): the geometric midpoint
    assert first_reach(c, np.array([0.5, 0.7, 0.8]), 0.6) == pytest.approx(np.sqrt(10 * 100))
    # a noisy dip is pooled: 0.7, 0.6 -> 0.65, 0.65, so 0.6 lies 2/3 of the way from 0.5 to 0.65
    assert first_reach(c, np.array([0.5, 0.7, 0.6]), 0.6) == pytest.approx(10 ** (5 / 3))
    assert first_reach(c, np.array([0.7, 0.8, 0.9]), 0.6) == 10.0  # reached by the first eval
    assert first_reach(c, np.array([0.5, 0.55, 0.58]), 0.6) == np.inf  # censored
    assert np.allclose(
        restricted_log(np.array([50.0, np.inf, 2000.0]), 1000.0), np.log([50, 1000, 1000])
    )


def test_slope_per_decade_by_hand():
    c = np.array([10.0, 100.0, 1000.0])
    assert slope_per_decade(c, np.array([0.5, 0.6, 0.7])) == pytest.approx(0.1)
    assert np.isnan(slope_per_decade(np.array([5.0, 5.0]), np.array([0.1, 0.2])))


C = np.geomspace(6e4, 6e6, 20)


def test_a_noise_free_arm_is_recovered_and_its_pseudo_values_equal_the_estimate():
    r = sigmoid(C, 0.85, 1.2, 4e5, 0.52)  # levelled within the compute: the seeds flatten
    fit = pooled_fit({s: (C, r, 0.52) for s in range(3)})
    assert fit.identified, fit.unidentified
    a, log_b, log_c_mid = fit.params
    assert a == pytest.approx(0.85, abs=1e-4) and np.exp(log_b) == pytest.approx(1.2, rel=1e-3)
    assert np.exp(log_c_mid) == pytest.approx(4e5, rel=1e-3)
    # identical seeds: leaving one out changes nothing, so every pseudo-value is the estimate
    assert np.allclose(fit.pseudo, fit.params, atol=1e-4)


def test_the_midpoint_must_lie_margin_times_inside_the_observed_compute():
    """The fit's own rules, on one seed (`bend=False`: the seeds' curvature test needs three,
    `tests/test_curve_plateau.py`)."""

    def fit(r):
        return pooled_fit({0: (C, r, 0.52)}, bend=False)

    inside = fit(sigmoid(C, 0.85, 1.2, 6e6 / (MARGIN * 1.5), 0.52))
    assert inside.identified, inside.unidentified
    late = fit(sigmoid(C, 0.85, 1.2, 6e6 / (MARGIN * 0.7), 0.52))
    assert "midpoint is not bracketed" in late.unidentified
    # a rise before the evals, then a plateau: A is identified, the shape (B, C_mid) is not
    early = fit(sigmoid(C, 0.85, 3.0, 6e4 * MARGIN * 0.7, 0.52))
    assert early.identified and early.params[0] == pytest.approx(0.85, abs=1e-3)
    assert "within 3× of the first fitted eval" in early.shape_unidentified
    assert inside.shape_unidentified == "" and late.shape_unidentified == late.unidentified


def _fit_with_leave_one_out(a: float, loo_a: list[float], r0: float):
    from ablate.report.curves.pooled import PooledFit

    loo = np.array([[x, 0.0, 0.0] for x in loo_a])
    return PooledFit(
        seeds=tuple(range(len(loo_a))),
        params=np.array([a, 0.0, 0.0]),
        loo=loo,
        unidentified="",
        r0=r0,
    )


def test_a_interval_is_the_jackknife_on_the_reciprocal_gain_by_hand():
    from scipy import stats

    from ablate.report.curves.analysis import asymptote_estimate
    from ablate.report.curves.pooled import reciprocal_gain_pseudo

    # A 0.8 over R0 0.5 (gain 0.3); leaving each seed out: 0.78, 0.82, 0.80
    fit = _fit_with_leave_one_out(0.8, [0.78, 0.82, 0.80], 0.5)
    g = 3 / 0.3 - 2 / np.array([0.28, 0.32, 0.30])  # 2.857, 3.750, 3.333
    assert np.allclose(reciprocal_gain_pseudo(fit), g)
    half = stats.t.ppf(0.975, 2) * g.std(ddof=1) / np.sqrt(3)
    e = asymptote_estimate(fit)
    assert e.value == pytest.approx(0.5 + 1 / g.mean())
    assert e.low == pytest.approx(0.5 + 1 / (g.mean() + half))
    assert e.high == pytest.approx(min(1.0, 0.5 + 1 / (g.mean() - half)))
    # the reciprocal stretches the interval towards high A, where the fit's ridge runs
    assert e.high - e.value > e.value - e.low


def test_a_interval_whose_reciprocal_gain_reaches_zero_runs_to_the_ceiling():
    from ablate.report.curves.analysis import asymptote_estimate

    # leave-one-out A's far apart: g's interval reaches 0, so A's has no upper end below 1
    e = asymptote_estimate(_fit_with_leave_one_out(0.8, [0.7, 0.9, 0.75], 0.5))
    assert e.high == 1.0 and 0.0 <= e.low < e.value <= 1.0
    # a single seed has no pseudo-values: no interval, no estimate
    one = asymptote_estimate(_fit_with_leave_one_out(0.8, [np.nan], 0.5))
    assert np.isnan(one.value) and np.isnan(one.low)
