"""ablate.report.stats on matrices small enough to check by hand."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from ablate.report.stats import inference


def test_holm_against_a_hand_worked_example():
    # sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> running max 0.06
    p = [0.01, 0.04, 0.03, 0.005]
    assert inference.holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_holm_caps_at_one_and_skips_nan():
    adjusted = inference.holm([0.5, np.nan, 0.2])  # two tests: 0.2*2 = 0.4, 0.5*1 -> max(0.4, 0.5)
    assert adjusted[0] == pytest.approx(0.5) and adjusted[2] == pytest.approx(0.4)
    assert np.isnan(adjusted[1])
    assert inference.holm([0.9, 0.8])[0] == 1.0


def test_estimate_excludes():
    assert inference.Estimate(1, 0.5, 2, 3).excludes(0) == 1
    assert inference.Estimate(-1, -2, -0.5, 3).excludes(0) == -1
    assert inference.Estimate(0, -1, 1, 3).excludes(0) == 0
    assert inference.Estimate(1, np.nan, np.nan, 1).excludes(0) == 0


# Seed-level inference: Student-t over seeds


def test_t_interval_by_hand_and_against_scipy():
    # (1, 2, 3): mean 2, sd 1, half-width t(0.975, 2) / sqrt(3) = 4.302653 / 1.732051 = 2.484138
    est = inference.t_interval([1.0, 2.0, np.nan, 3.0])
    assert (est.value, est.std, est.n) == pytest.approx((2.0, 1.0, 3))
    assert (est.low, est.high) == pytest.approx((2 - 2.484138, 2 + 2.484138), abs=1e-6)
    x = np.random.default_rng(0).normal(size=7)
    low, high = sps.t.interval(0.95, 6, loc=x.mean(), scale=sps.sem(x))
    assert (inference.t_interval(x).low, inference.t_interval(x).high) == pytest.approx((low, high))


def test_t_interval_below_min_seeds_is_a_mean_only():
    two = inference.t_interval([0.4, 0.6])
    assert (
        two.value == pytest.approx(0.5) and two.n == 2 and two.std == pytest.approx(np.sqrt(0.02))
    )
    assert np.isnan(two.low) and np.isnan(two.high) and two.excludes(0) == 0
    one = inference.t_interval([0.4])
    assert one.value == 0.4 and np.isnan(one.std) and np.isnan(one.low)
    assert inference.t_interval([]).n == 0


def test_t_half_width_broadcasts_and_gives_nothing_below_min_seeds():
    half = inference.t_half_width(np.array([[1.0], [2.0]]), np.array([2, 3, 10]))  # [2, 1] x [3]
    assert half.shape == (2, 3) and np.isnan(half[:, 0]).all()
    assert half[0, 1] == pytest.approx(2.484138, abs=1e-6)  # t(0.975, 2) / sqrt(3)
    assert half[1, 2] == pytest.approx(2 * sps.t.ppf(0.975, 9) / np.sqrt(10))


def test_paired_t_p_by_hand_and_vectorised():
    # (1, 2, 3): t = 2 / (1 / sqrt 3) = sqrt 12; 2 df: p = 1 - t / sqrt(2 + t^2) = 1 - sqrt(12/14)
    d = np.array([[1.0, 2, 3], [0, 0, 0], [2, 2, 2], [1, -1, 0]])
    p = inference.paired_t_p(d)
    assert p[[0, 3]] == pytest.approx([1 - np.sqrt(12 / 14), 1.0])
    assert np.isnan(p[1]) and np.isnan(p[2])  # constant differences: no variance, no test
    x = np.random.default_rng(1).normal(0.3, 1, size=(3, 6))
    assert inference.paired_t_p(x) == pytest.approx(sps.ttest_1samp(x, 0, axis=1).pvalue)
    assert np.isnan(inference.paired_t_p(np.array([1.0, 2.0])))  # two seeds: no p-value


def test_sign_flip_p_enumerates_every_pattern():
    # (1, -1, 2): the 8 signed sums are 2, -2, 4, 0, 0, -4, 2, -2: six reach |2| -> 6/8
    p = inference.sign_flip_p(np.array([[1.0, 2, 3], [1, -1, 2]]))
    assert p == pytest.approx([2 / 8, 6 / 8])
    assert inference.sign_flip_p(np.ones(6)) == pytest.approx(2 / 64)
    assert np.isnan(inference.sign_flip_p(np.array([1.0, 2.0])))


def test_holm_adjusts_each_row_of_a_2d_array_by_hand():
    p = np.array([[0.01, 0.04, 0.03, 0.005], [0.5, np.nan, 0.2, np.nan], [np.nan] * 4])
    adjusted = inference.holm(p)
    assert adjusted[0] == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # second row: two tests, 0.2*2 = 0.4 then max(0.4, 0.5*1); NaN stays NaN and does not count
    assert adjusted[1, [0, 2]] == pytest.approx([0.5, 0.4]) and np.isnan(adjusted[1, [1, 3]]).all()
    assert np.isnan(adjusted[2]).all()
    cube = np.random.default_rng(2).random((3, 2, 5))
    rows = np.array([[inference.holm(row) for row in block] for block in cube])
    assert inference.holm(cube) == pytest.approx(rows)


def test_paired_contrast_by_hand():
    contrast = inference.paired_contrast(np.array([0.5, 0.6, 0.7, np.nan]), [0.4, 0.4, 0.6, 0.1])
    # d = (0.1, 0.2, 0.1): mean 2/15, sd 0.057735, t = 4, p = 1 - 4 / sqrt(18)
    assert contrast.n == 3 and contrast.test == "paired t"
    assert contrast.diff.value == pytest.approx(2 / 15)
    assert contrast.sd == pytest.approx(0.057735, abs=1e-6)
    assert contrast.p_value == pytest.approx(1 - 4 / np.sqrt(18))
    assert contrast.p_sign_flip == pytest.approx(2 / 8)  # only +++ and --- reach |0.4|
    assert contrast.diff.low < 0 < contrast.diff.high  # p > 0.05 <=> interval holds 0
    two = inference.paired_contrast([0.5, 0.6], [0.4, 0.4])
    assert np.isnan(two.p_value) and np.isnan(two.p_sign_flip) and np.isnan(two.diff.low)
    assert two.sd == pytest.approx(np.sqrt(0.005))


def test_welch_contrast_by_hand_and_against_scipy():
    a, r = np.array([1.0, 2, 3, 4, np.nan]), np.array([2.0, 4, 6, 9])
    contrast = inference.welch_contrast(a, r)
    # SE^2 = 1.6667/4 + 8.9167/4 = 2.64583; sd = sqrt(4) * SE
    assert contrast.diff.value == pytest.approx(-2.75) and contrast.n == 4
    assert contrast.sd == pytest.approx(2 * np.sqrt(2.645833), abs=1e-5)
    ref = sps.ttest_ind(a[:4], r, equal_var=False)
    assert contrast.p_value == pytest.approx(ref.pvalue)
    ci = ref.confidence_interval(0.95)
    assert (contrast.diff.low, contrast.diff.high) == pytest.approx((ci.low, ci.high))
    assert np.isnan(contrast.p_sign_flip) and contrast.test == "Welch t"
    assert np.isnan(inference.welch_contrast([1.0, 2.0], r).p_value)  # a group of two: no test


def test_power_paired_matches_published_values():
    # G*Power, paired/one-sample t, d = 0.5, alpha = 0.05 two-sided: N = 34 gives power 0.8078
    assert inference.power_paired(0.5, 1.0, 34) == pytest.approx(0.8077775, abs=1e-6)
    assert inference.seeds_needed(0.5, 1.0) == 34
    # large n: the normal approximation, Phi(d sqrt(n) - z) with d sqrt(n) = 2.8
    assert inference.power_paired(0.14, 1.0, 400) == pytest.approx(
        sps.norm.cdf(2.8 - 1.96), abs=3e-3
    )
    assert inference.power_paired(0.0, 1.0, 10) == pytest.approx(0.05)  # no effect: alpha
    assert np.isnan(inference.power_paired(0.5, 1.0, 2)) and np.isnan(
        inference.power_paired(1, 0, 5)
    )


def test_power_paired_matches_the_rejection_rate_of_paired_t_p():
    rng = np.random.default_rng(3)
    diffs = rng.normal(0.6, 1.0, size=(20000, 8))  # [sims, n]
    rate = np.mean(inference.paired_t_p(diffs) < 0.05)
    expected = inference.power_paired(0.6, 1.0, 8)
    assert abs(rate - expected) < 3 * np.sqrt(expected * (1 - expected) / 20000)


def test_mde_and_power_round_trip_and_seeds_needed_is_minimal():
    for n, alpha in ((3, 0.05), (5, 0.05 / 3), (10, 0.05 / 7)):
        mde = inference.mde_paired(0.03, n, alpha=alpha)
        assert inference.power_paired(mde, 0.03, n, alpha) == pytest.approx(0.8, abs=1e-9)
        assert inference.mde_paired(0.06, n, alpha=alpha) == pytest.approx(2 * mde)
    assert np.isnan(inference.mde_paired(0.03, 2)) and np.isnan(inference.mde_paired(np.inf, 5))
    n = inference.seeds_needed(0.02, 0.03, alpha=0.05 / 3)
    assert inference.power_paired(0.02, 0.03, n, 0.05 / 3) >= 0.8
    assert inference.power_paired(0.02, 0.03, n - 1, 0.05 / 3) < 0.8
    assert inference.seeds_needed(0.0, 0.03) is None
    assert inference.seeds_needed(0.001, 0.03, max_n=50) is None
    assert (
        inference.seeds_needed(1.0, 0.03) == inference.MIN_SEEDS
    )  # huge effect: the floor, not fewer


def test_zero_variance_gives_no_p_value_not_p_zero():
    # a constant nonzero difference used to print p = 0 ("infinitely significant")
    contrast = inference.paired_contrast(np.array([0.6, 0.7, 0.8]), np.array([0.5, 0.6, 0.7]))
    assert np.isnan(contrast.p_value) and contrast.diff.value == pytest.approx(0.1)
    assert contrast.p_sign_flip == pytest.approx(2 / 8)  # the exact test still has its floor
    same = inference.paired_contrast(np.array([0.5, 0.6, 0.7]), np.array([0.5, 0.6, 0.7]))
    assert np.isnan(same.p_value)
    # a NaN p is no test: Holm neither counts it nor adjusts the others for it
    assert inference.holm([contrast.p_value, 0.02]) == pytest.approx([np.nan, 0.02], nan_ok=True)


def test_welch_gives_no_p_value_when_both_groups_are_constant():
    assert np.isnan(inference.welch_contrast([0.5, 0.5, 0.5], [0.4, 0.4, 0.4]).p_value)
    assert np.isnan(inference.welch_contrast([0.5, 0.5, 0.5], [0.5, 0.5, 0.5]).p_value)
    # one constant group: the other's variance carries the test
    p = inference.welch_contrast([0.5, 0.5, 0.5], [0.4, 0.5, 0.6]).p_value
    assert p == pytest.approx(sps.ttest_1samp([0.4, 0.5, 0.6], 0.5).pvalue)
