"""The report's statistics on simulated studies: the simulator does what it says, and the
intervals, marks and power analysis keep their promises (devtools.calibration.calibration)."""

from __future__ import annotations

import numpy as np
import pytest

from ablate.report.stats import inference
from devtools.__main__ import main
from devtools.calibration.calibration import calibrate, format_table
from devtools.calibration.simulate import StudyModel, simulate

STUDIES = 2000


@pytest.fixture(scope="module")
def shared() -> object:
    """Eval noise shared by the arms of a seed (common random numbers), with power runs."""
    return calibrate(StudyModel(), seeds=(2, 3, 5, 10), arms=(4, 8), studies=STUDIES, seed=1)


@pytest.fixture(scope="module")
def independent() -> object:
    model = StudyModel(shared_eval_noise=False)
    return calibrate(model, seeds=(3, 5, 10), arms=(4, 8), studies=STUDIES, seed=2, power=False)


def _within_study_corr(x: np.ndarray) -> float:
    """Correlation over seeds of arm 0 and arm 1, pooled within studies: x [S, 2, n]."""
    c = x - x.mean(axis=2, keepdims=True)
    return float((c[:, 0] * c[:, 1]).sum() / np.sqrt((c[:, 0] ** 2).sum() * (c[:, 1] ** 2).sum()))


# the simulator


@pytest.mark.parametrize(("seed_sd", "base_pass"), [(0.035, 0.5), (0.08, 0.3)])
def test_realised_seed_sd_matches_the_requested_one(seed_sd, base_pass):
    model = StudyModel(arms=2, seeds=10, seed_sd=seed_sd, base_pass=base_pass)
    studies = simulate(model, STUDIES, 0)
    assert studies.observed.shape == studies.expected.shape == (STUDIES, 2, 10)
    var = studies.expected.var(axis=2, ddof=1).mean(axis=1)  # [studies]: unbiased per study
    assert abs(var.mean() - seed_sd**2) < 3 * var.std() / np.sqrt(STUDIES)
    # eval noise comes on top: the observed spread is larger
    assert studies.observed.var(axis=2, ddof=1).mean() > var.mean()


def test_requested_effects_are_the_true_and_the_realised_mean_differences():
    effects = (0.0, 0.05, -0.03, 0.0)
    studies = simulate(StudyModel(arms=4, seeds=10, effects=effects), STUDIES, 1)
    assert studies.truth - studies.truth[:, :1] == pytest.approx(np.tile(effects, (STUDIES, 1)))
    assert (studies.shift[:, [0, 3]] == 0).all() and (studies.shift[:, 1] > 0).all()
    # the solved logit shifts deliver the effect: in the runs' expected and observed pass@1
    for runs in (studies.expected, studies.observed):
        d = (runs - runs[:, :1]).mean(axis=2)  # [studies, arms]
        se = d.std(axis=0, ddof=1) / np.sqrt(STUDIES)
        assert np.all(np.abs(d.mean(axis=0) - effects) <= 3 * se + 1e-12)


def test_shared_eval_noise_makes_the_arms_of_a_seed_positively_correlated():
    def residual_corr(shared_eval_noise: bool) -> float:
        model = StudyModel(
            arms=2, seeds=10, shared_fraction=0.0, shared_eval_noise=shared_eval_noise
        )
        s = simulate(model, STUDIES, 2)
        return _within_study_corr(s.observed - s.expected)  # eval noise only

    assert residual_corr(True) > 0.5
    assert abs(residual_corr(False)) < 0.05


def test_shared_fraction_is_the_correlation_of_the_arms_training_outcomes():
    studies = simulate(StudyModel(arms=2, seeds=10, shared_fraction=0.5), STUDIES, 3)
    assert _within_study_corr(studies.expected) == pytest.approx(0.5, abs=0.05)


def test_simulation_is_deterministic_for_a_seed():
    model = StudyModel(arms=3, seeds=3, problems=8, samples=2)
    a, b = simulate(model, 50, 7), simulate(model, 50, 7)
    assert np.array_equal(a.observed, b.observed) and np.array_equal(a.truth, b.truth)
    assert not np.array_equal(a.observed, simulate(model, 50, 8).observed)


# the report's statistics, calibrated


@pytest.mark.parametrize("table", ["shared", "independent"])
@pytest.mark.parametrize("n", [3, 5, 10])
def test_95_percent_intervals_cover_95_percent(table, n, request):
    row = request.getfixturevalue(table).loc[n]
    assert 0.93 <= row["arm_coverage"] <= 0.97
    assert 0.93 <= row["contrast_coverage"] <= 0.97


@pytest.mark.parametrize("table", ["shared", "independent"])
@pytest.mark.parametrize("n", [3, 5, 10])
@pytest.mark.parametrize("arms", [4, 8])
def test_marks_keep_the_family_wise_error_rate_under_null(table, n, arms, request):
    row = request.getfixturevalue(table).loc[n]
    for col in (f"fwer_{arms}arms", f"signflip_fwer_{arms}arms"):
        assert row[col] <= inference.ALPHA + 2 * max(row[f"{col}_se"], 1 / STUDIES)


@pytest.mark.parametrize("n", [5, 10])
@pytest.mark.parametrize("arms", [4, 8])
def test_the_power_analysis_mde_is_detected_80_percent_of_the_time(shared, n, arms):
    row = shared.loc[n]
    assert row[f"power_{arms}arms"] >= 0.8 - 2 * row[f"power_{arms}arms_se"]
    assert 0 < row[f"mde_{arms}arms"] < 0.2


def test_too_few_seeds_give_no_interval_and_no_mark(shared):
    row = shared.loc[2]
    assert np.isnan(row["arm_coverage"]) and np.isnan(row["contrast_coverage"])
    assert row["fwer_4arms"] == 0 and row["fwer_8arms"] == 0
    assert np.isnan(row["mde_4arms"]) and "too few seeds" in row["note"]
    assert "n=2: too few seeds" in format_table(shared)


def test_welch_contrast_is_calibrated_for_independent_groups():
    # two groups of different seeds: no shared training outcome, no shared eval draws
    model = StudyModel(arms=2, seeds=5, shared_fraction=0.0, shared_eval_noise=False)
    studies = simulate(model, STUDIES, 4)
    a, r = studies.observed[:, 1, :5], studies.observed[:, 0, :3]  # unequal groups, 5 and 3
    diff, half, p, _ = inference.welch_t(a, r)
    truth = studies.truth[:, 1] - studies.truth[:, 0]
    coverage = np.mean((diff - half <= truth) & (truth <= diff + half))
    assert 0.93 <= coverage <= 0.97
    assert np.mean(p < inference.ALPHA) <= inference.ALPHA + 2 * np.sqrt(0.05 * 0.95 / STUDIES)


# the command


def test_calibrate_command_prints_the_table(capsys):
    argv = ["calibrate", "--seeds", "2,3", "--arms", "4", "--studies", "100", "--seed", "1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("| n |"))
    for column in ("arm cov", "contrast cov", "FWER A=4", "sign-flip FWER A=4", "MDE A=4"):
        assert f"| {column} |" in header
    assert header.endswith("| power A=4 | MC error |")
    rows = [line for line in out.splitlines() if line.startswith(("| 2 |", "| 3 |"))]
    assert len(rows) == 2 and all(r.count("|") == header.count("|") for r in rows)
    assert "n=2: too few seeds" in out and "Model: 64 problems × 8 samples" in out


@pytest.mark.parametrize(
    ("option", "value"),
    [("--seed-sd", "0"), ("--base-pass", "1.5"), ("--seeds", "1,3"), ("--arms", "1")],
)
def test_calibrate_command_bad_option_is_one_line(capsys, option, value):
    assert main(["calibrate", option, value, "--studies", "10"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and option in err and "\n" not in err
