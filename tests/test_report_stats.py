"""ablate.report.stats on matrices small enough to check by hand."""

from __future__ import annotations

import numpy as np
import pytest

from ablate.report import stats


def test_iqm_pools_runs_and_tasks_and_trims_a_quarter_each_side():
    # 8 pooled values 1..8: drop 1, 2 and 7, 8 -> mean(3, 4, 5, 6) = 4.5
    x = np.array([[1, 5], [2, 6], [3, 7], [4, 8]], dtype=float)
    assert stats.iqm(x) == pytest.approx(4.5)
    assert stats.mean_score(x) == pytest.approx(4.5)
    # an outlier moves the mean, not the IQM
    y = x.copy()
    y[3, 1] = 800
    assert stats.iqm(y) == pytest.approx(4.5)
    assert stats.mean_score(y) > 90


def test_mean_score_is_mean_of_task_means():
    x = np.array([[0.0, 1.0], [1.0, 1.0]])  # task means 0.5 and 1.0
    assert stats.mean_score(x) == pytest.approx(0.75)


def test_run_std_is_spread_of_per_run_means():
    x = np.array([[1.0, 3.0], [3.0, 5.0]])  # run means 2 and 4 -> sample std sqrt(2)
    assert stats.run_std(x) == pytest.approx(np.sqrt(2))


def test_stratified_resamples_only_draw_runs_within_their_own_task():
    x = np.array([[0.0, 10.0], [1.0, 11.0], [2.0, 12.0]])
    boot = stats.stratified_resamples(x, 200, np.random.default_rng(0))
    assert boot.shape == (200, 3, 2)
    assert set(np.unique(boot[:, :, 0])) == {0.0, 1.0, 2.0}
    assert set(np.unique(boot[:, :, 1])) == {10.0, 11.0, 12.0}


def test_constant_scores_have_a_zero_width_interval_and_one_run_has_none():
    est = stats.interval_estimate(np.full((4, 2), 0.3))
    assert (est.value, est.low, est.high, est.n) == pytest.approx((0.3, 0.3, 0.3, 4))
    one = stats.interval_estimate(np.array([[0.5]]))
    assert one.value == 0.5 and np.isnan(one.low) and one.n == 1


def test_bootstrap_ci_covers_the_true_mean_about_95_percent_of_the_time():
    rng = np.random.default_rng(123)
    sims, runs, tasks, true_mean = 600, 20, 3, 0.4
    hits = 0
    for i in range(sims):
        x = rng.normal(true_mean, 0.2, size=(runs, tasks))
        est = stats.interval_estimate(x, reps=1000, seed=i)
        hits += est.low <= true_mean <= est.high
    assert 0.92 <= hits / sims <= 0.98


def test_sign_flip_p_value_by_hand():
    # d = (1, 2, 3): of the 8 sign patterns only +++ and --- reach |mean| = 2 -> p = 2/8
    assert stats.sign_flip_p_value(np.array([1.0, 2.0, 3.0])) == pytest.approx(0.25)
    # d = (1, -1): every pattern has |mean| >= 0 -> p = 1
    assert stats.sign_flip_p_value(np.array([1.0, -1.0])) == pytest.approx(1.0)
    assert np.isnan(stats.sign_flip_p_value(np.array([])))
    # six equal positive differences: p = 2/64, the smallest possible with 6 seeds
    assert stats.sign_flip_p_value(np.ones(6)) == pytest.approx(2 / 64)


def test_paired_comparison_uses_only_seeds_present_in_both_arms():
    arm = np.array([0.5, 0.6, np.nan, 0.9])
    ref = np.array([0.4, 0.4, 0.1, np.nan])
    cmp = stats.paired_comparison(arm, ref)
    assert cmp.diff.n == 2
    assert cmp.diff.value == pytest.approx(0.15)  # mean of 0.1 and 0.2
    assert cmp.p_value == pytest.approx(0.5)  # 2 of 4 sign patterns


def test_per_problem_wilcoxon_matches_scipy_and_ignores_identical_problems():
    a = np.array([1.0, 1.0, 0.5, 0.75, 0.0, 1.0, 1.0, 1.0])
    r = np.array([0.0, 0.5, 0.0, 0.25, 0.0, 0.25, 0.5, 0.0])
    from scipy.stats import wilcoxon

    cmp = stats.per_problem_test(a, r)
    assert cmp.p_value == pytest.approx(wilcoxon(a, r).pvalue)
    assert cmp.diff.value == pytest.approx(np.mean(a - r))
    assert stats.per_problem_test(a, a).p_value == 1.0


def test_holm_against_a_hand_worked_example():
    # sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> running max 0.06
    p = [0.01, 0.04, 0.03, 0.005]
    assert stats.holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_holm_caps_at_one_and_skips_nan():
    adjusted = stats.holm([0.5, np.nan, 0.2])  # two tests: 0.2*2 = 0.4, 0.5*1 -> max(0.4, 0.5)
    assert adjusted[0] == pytest.approx(0.5) and adjusted[2] == pytest.approx(0.4)
    assert np.isnan(adjusted[1])
    assert stats.holm([0.9, 0.8])[0] == 1.0


def test_probability_of_improvement_by_hand():
    # pairs (1,0) win, (1,3) lose, (2,0) win, (2,3) lose -> 2/4
    assert stats.probability_of_improvement(np.array([1.0, 2.0]), np.array([0.0, 3.0])) == 0.5
    # ties count one half
    assert stats.probability_of_improvement(np.array([1.0]), np.array([1.0])) == 0.5
    # averaged over tasks: task 1 always better (1), task 2 always worse (0)
    x, y = np.array([[5.0, 0.0], [6.0, 1.0]]), np.array([[1.0, 5.0], [2.0, 6.0]])
    assert stats.probability_of_improvement(x, y) == 0.5


def test_rank_correlation_is_spearman_and_undefined_for_constants():
    est = stats.rank_correlation(
        np.array([1.0, 2, 3, 4, 5]), np.array([2.0, 4, 5, 9, 20]), reps=200
    )
    assert est.value == pytest.approx(1.0) and est.n == 5
    assert np.isnan(stats.rank_correlation(np.ones(5), np.arange(5.0)).value)


def test_estimate_excludes():
    assert stats.Estimate(1, 0.5, 2, 3).excludes(0) == 1
    assert stats.Estimate(-1, -2, -0.5, 3).excludes(0) == -1
    assert stats.Estimate(0, -1, 1, 3).excludes(0) == 0
    assert stats.Estimate(1, np.nan, np.nan, 1).excludes(0) == 0
