"""Compute–performance curves in the report, on in-memory studies simulated from known curves:
eval points on the compute axis, per-arm parameters with seed intervals, the comparison rule,
"no fit" rows, the tables in every format and the figure."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ablate.presets import baseline
from ablate.report.curves import analysis, section
from ablate.report.render import figures, formats
from ablate.report.render.tables import build_tables
from ablate.spec import CurveSpec
from ablate.testing import study_data
from devtools.calibration.curve_calibration import CurveModel, simulate_seed

REF = dataclasses.replace(baseline("grpo"), kl_coef=0.0, minibatches=4)
ALGOS = {name: REF for name in ("grpo", "higher_a", "steeper", "flat")}
SPEC = CurveSpec(axis="generated_tokens", warmup=50_000, target=0.6)
STUDY_POINTS = np.asarray(CurveModel().points)[np.asarray(CurveModel().points) > 50_000]
QUIET = dict(a_sd=0.004, log_sd=0.03, evals=16_384)  # small seed spread and eval noise
MODELS = {
    "grpo": CurveModel(**QUIET),
    "higher_a": CurveModel(a=0.93, **QUIET),
    "steeper": CurveModel(b=2.4, **QUIET),
}


def trial(model: CurveModel | None, seed: int) -> dict:
    """A trial's logged curves: eval pass@1 at step 0 and at steps 1.. where the generated
    tokens are the schedule's points (with their token marks)."""
    rng = np.random.default_rng(seed)
    if model is None:  # flat: no learning at all
        c = np.asarray(CurveModel().points)
        r, r0 = 0.52 + rng.normal(0, 0.01, len(c)), 0.52
    else:
        c, r, r0, _ = simulate_seed(model, rng)
    steps = range(1, len(c) + 1)
    return {
        "eval/pass_at_1": {0: r0, **dict(zip(steps, r, strict=True))},
        "budget/generated_tokens": dict(zip(steps, c, strict=True)),
        "eval/token_mark": dict(zip(steps, c, strict=True)),
    }


@pytest.fixture(scope="module")
def data():
    runs = [
        (arm, "rl_ready", s, trial(MODELS.get(arm), 10 * i + s))
        for i, arm in enumerate(ALGOS)
        for s in range(3)
    ]
    base = study_data(runs, algorithms=ALGOS, reference="grpo")
    return dataclasses.replace(base, curves=SPEC)


@pytest.fixture(scope="module")
def arms(data):
    return analysis.arm_curves(data, SPEC)


def test_eval_points_read_compute_at_each_eval_and_zero_before_training(data):
    points = analysis.eval_points(data, SPEC)
    first = points[points["trial_id"] == "t0"]
    assert first["compute"].iloc[0] == 0.0 and first["step"].iloc[0] == 0
    assert first["compute"].iloc[1:].tolist() == list(CurveModel().points)
    assert (first["mark"].iloc[1:] == first["compute"].iloc[1:]).all()


def test_parameters_are_recovered_per_arm(arms):
    """The pipeline's wiring (fit precision is tested in test_curvefit, coverage in the
    calibration tests): every seed fitted, estimates near the simulated truth."""
    by_arm = {a.arm: a for a in arms}
    for name, model in MODELS.items():
        arm = by_arm[name]
        assert len(arm.fitted) == 3
        assert arm.estimate("a").value == pytest.approx(model.a, abs=0.02)
        assert arm.estimate("b").value == pytest.approx(model.b, rel=0.25)
        assert arm.estimate("c_mid").value == pytest.approx(model.c_mid, rel=0.2)
        assert np.isfinite(arm.estimate("a").low) and arm.estimate("a").n == 3


def test_flat_curves_get_no_fit_with_the_reason_and_no_numbers(arms):
    flat = next(a for a in arms if a.arm == "flat")
    assert not flat.fitted
    assert all("no fit: no rise above the noise" in t.fit.reason for t in flat.fits)
    assert np.isnan(flat.estimate("a").value)


def test_the_comparison_rule_a_first_then_b_with_a_shared_a(arms):
    rows = {r.arm: r for r in analysis.contrasts(arms, "grpo", SPEC)}
    assert rows["higher_a"].a_differs and rows["higher_a"].delta_a.diff.value > 0.05
    assert rows["higher_a"].b_ratio is None  # A decides: B is not compared
    steeper = rows["steeper"]
    assert not steeper.a_differs and steeper.p_b < 0.05
    assert steeper.b_ratio.low <= 2.0 <= steeper.b_ratio.high  # B 2.4 vs 1.2
    assert "B higher" in section._verdict(steeper)
    # compute to pass@1 0.6 (R0 0.52, A 0.85): C_mid / 3.125^(1/B) = 933k at B 2.4 vs 580k at
    # B 1.2: the steeper curve needs 1.61x the compute to get there (it starts later)
    assert steeper.target_ratio.value == pytest.approx(1.61, rel=0.1) and steeper.p_target < 0.05
    assert steeper.target_ratio.n == 3
    assert rows["flat"].delta_a.n == 0 and "too few seeds" in section._verdict(rows["flat"])


def test_curves_without_an_a_of_their_own_are_still_compared_on_b_with_a_shared_a():
    """Curves that have not levelled off (A at its bound: no per-seed fit) leave ΔA untestable;
    the rule then compares B with a shared A, and the verdict and table say which seeds each
    rests on."""
    from ablate.report.stats import inference

    one_seed = inference.paired_contrast(np.array([0.99, np.nan, np.nan]), np.array([0.99, 0.9, 1]))
    ratio = analysis.seed_interval(np.array([1.5, 1.6, 1.4]), log=True)
    row = analysis.CurveContrast("dapo", "grpo", one_seed, b_ratio=ratio, p_b=0.01)
    verdict = section._verdict(row)
    assert verdict.startswith("A not testable: too few seeds with fits of both (1)")
    assert verdict.endswith("B higher (shared A)")
    cells = section.contrast_table([row]).rows[0]
    assert (cells["seeds A"], cells["seeds B"]) == (1, 3)
    lower = analysis.CurveContrast("dapo", "grpo", one_seed, b_ratio=ratio, p_b=0.3)
    assert "B within the noise" in section._verdict(lower)


def test_curves_at_the_ceiling_show_a_and_c_mid_without_intervals_and_skip_the_a_test():
    """A seed refused at A's bound, or with A within one standard error of 1, marks the arm not
    levelled off: A and C_mid keep their means but lose their intervals (they undercover
    there); B keeps its interval; the A test is skipped and B compared with a shared A."""
    from ablate.report.curves.check import at_ceiling
    from ablate.report.curves.fit import NOT_LEVELLED, Fit, no_fit, sigmoid

    c = STUDY_POINTS
    residuals = 0.02**2 * len(c)  # noise SD 0.02 per eval
    for a, ceiling in ((0.85, False), (0.99, True)):
        fit = Fit(a=a, b=1.0, c_mid=2e6, r0=0.5, ssr=residuals, n=len(c))
        assert at_ceiling(fit, c) is ceiling, a  # SE of A about 0.03 on these points
    exact = Fit(a=0.99, b=1.0, c_mid=2e5, r0=0.5, ssr=1e-8, n=len(c))  # levelled, no noise
    assert np.allclose(sigmoid(c[-3:], 0.99, 1.0, 2e5, 0.5), 0.99, atol=0.02)
    assert not at_ceiling(exact, c)
    assert at_ceiling(no_fit(NOT_LEVELLED, 20), c)
    assert not at_ceiling(no_fit("no rise above the noise", 20), c)

    model = CurveModel(a=0.99, b=0.9, c_mid=2_200_000.0, a_sd=0.005, log_sd=0.03, evals=16_384)
    spec = CurveSpec(warmup=50_000)
    arms = []
    for k, name in enumerate(("ref", "arm")):
        rng = np.random.default_rng(3 + 10 * k)  # two draws: identical curves have no B test
        trials = [_curve(model, rng, name, s) for s in range(6)]
        arms.append(analysis.ArmCurves(name, [analysis.analyse(t, spec) for t in trials]))
    ref = arms[0]
    assert ref.not_levelled and len(ref.fitted) >= 3
    a, b, c_mid = (ref.estimate(k) for k in ("a", "b", "c_mid"))
    assert a.value == pytest.approx(0.99, abs=0.02) and np.isnan(a.low) and np.isnan(c_mid.high)
    assert np.isfinite(b.low) and np.isfinite(b.high)
    (row,) = analysis.contrasts(arms, "ref", spec)
    assert not row.levelled and np.isnan(row.p_a) and not row.a_differs
    assert row.b_ratio is not None and np.isfinite(row.p_b)
    assert section._verdict(row).startswith("A not tested: the curves have not levelled off")
    cells = section.curves_table(arms, spec).rows[0]
    assert cells["levelled off"] == "no: A, C_mid means only"


def _curve(model, rng, arm, seed):
    from devtools.calibration.curve_calibration import seed_curve

    return seed_curve(model, rng, arm, seed)


def test_the_comparison_rule_rarely_marks_two_arms_of_one_truth_in_a_small_simulation():
    """The full check (400 studies per row, README) is `python -m devtools
    curve-calibration`; here 40 studies of 3 seeds at the default curve model."""
    from devtools.calibration.curve_calibration import null_marks

    got = null_marks(CurveModel(), seeds=3, studies=40)
    assert got["A marked"] <= 0.2 and got["B marked"] <= 0.2, got  # 0.05 + 4 binomial SDs


def test_the_comparison_rule_detects_a_doubled_b_in_a_small_simulation():
    """Power, against the null above: an arm whose B is 2× the reference's (the README's table:
    0.955 at 5 seeds over 200 studies); here 20 studies of 5 seeds, without A marks."""
    from devtools.calibration.curve_calibration import null_marks

    steeper = dataclasses.replace(CurveModel(), b=2 * CurveModel().b)
    got = null_marks(CurveModel(), seeds=5, studies=20, other=steeper)
    assert got["B marked"] >= 0.6 and got["A marked"] <= 0.2, got


def test_tables_render_in_every_format_and_the_report_places_them_after_the_headline(data):
    built = build_tables(data)
    names = [t.name for t in built.tables]
    assert names[2:4] == ["compute_curves", "compute_curve_contrasts"]
    table = built.tables[2]
    row = next(r for r in table.rows if r["arm"] == "flat")
    assert row["fitted"] == "0/3" and "no fit" in row["no fit"]
    for text in (formats.to_markdown(table), formats.to_latex(table)):
        assert "C\\_mid" in text or "C_mid" in text
    frame = formats.to_frame(table)
    assert {"A", "A low", "A high", "B", "C_mid", "forecast RMSE", "compute to 0.6"} <= set(frame)
    assert built.findings["Compute–performance curves"]


def test_the_figure_is_drawn_and_saved_as_png_and_pdf(data, tmp_path):
    assert figures.FIGURES["compute_curves"] is section.draw  # write_figures saves it
    plt = figures._plt()
    fig, ax = plt.subplots()
    assert section.draw(data, ax)
    labels = [t.get_text() for t in ax.legend().get_texts()]
    assert any(label.startswith("grpo: A=0.85") for label in labels)
    assert "flat: no fit" in labels
    for ext in ("png", "pdf"):
        fig.savefig(tmp_path / f"compute_curves.{ext}")
        assert (tmp_path / f"compute_curves.{ext}").stat().st_size > 0
    plt.close(fig)


def test_the_figure_draws_no_asymptote_for_curves_that_have_not_levelled_off():
    ceiling = CurveModel(a=0.99, b=0.9, c_mid=2_200_000.0, a_sd=0.005, log_sd=0.03)
    runs = [
        (arm, "rl_ready", s, trial(m, 50 + 10 * i + s))
        for i, (arm, m) in enumerate((("grpo", MODELS["grpo"]), ("higher_a", ceiling)))
        for s in range(3)
    ]
    algos = {"grpo": REF, "higher_a": REF}
    data = dataclasses.replace(study_data(runs, algorithms=algos, reference="grpo"), curves=SPEC)
    plt = figures._plt()
    fig, ax = plt.subplots()
    assert section.draw(data, ax)
    labels = [t.get_text() for t in ax.legend().get_texts()]
    assert any(
        label.startswith("higher_a: A≈0.9") and "not levelled off" in label for label in labels
    )
    assert any(label.startswith("grpo: A=0.8") for label in labels), labels
    flat_lines = [line for line in ax.get_lines() if len(set(line.get_ydata())) == 1]
    assert len(flat_lines) == 1  # grpo's asymptote only
    plt.close(fig)


def test_without_a_curve_spec_the_report_has_no_curve_section(data):
    plain = dataclasses.replace(data, curves=None)
    assert not section.has_curves(plain) and section.curve_sentences(plain) == []
    built = build_tables(plain)
    assert not {"compute_curves", "compute_curve_contrasts"} & {t.name for t in built.tables}
    assert "Compute–performance curves" not in built.findings


def test_curve_intervals_cover_in_a_small_simulation():
    """The full check (1,000 studies per row, README) is `python -m devtools
    curve-calibration 1000`; here 20 studies, coverage within its MC error."""
    from devtools.calibration.curve_calibration import coverage

    got = coverage(CurveModel(), seeds=3, studies=20)
    for key in ("A coverage", "B coverage", "C_mid coverage", "to target coverage"):
        assert got[key] >= 0.75, got  # 0.95 less 4 binomial SDs of 20 studies
    assert got["refused fits"] < 0.15


@pytest.mark.slow
@pytest.mark.parametrize("seeds", [3, 5])
def test_curve_intervals_are_calibrated_at_the_seed_counts_users_run(seeds):
    """Every interval the report shows covers within 3 MC errors of 95%; at the curves the
    study measured (A near the ceiling) A's and C_mid's are withheld in nearly every study; two
    arms of one truth are marked different at most at the nominal rate."""
    from devtools.calibration.curve_calibration import SCENARIOS, coverage, null_marks

    for name, model in SCENARIOS.items():
        got = coverage(model, seeds=seeds, studies=300)
        ceiling = name.startswith("as measured")
        keys = ("B coverage", "to target coverage")
        keys += () if ceiling else ("A coverage", "C_mid coverage")
        for key in keys:
            assert abs(got[key] - 0.95) <= 3 * got["MC error"] + 0.005, (name, key, got)
        assert got["withheld"] >= 0.93 if ceiling else got["withheld"] < 0.6, (name, got)
        marks = null_marks(model, seeds=seeds, studies=300)
        for key in ("A marked", "B marked", "target marked"):
            assert marks[key] <= 0.05 + 3 * marks["MC error"], (name, key, marks)
