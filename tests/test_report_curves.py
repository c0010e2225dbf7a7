"""Compute–performance curves in the report, on in-memory studies simulated from known curves:
eval points on the compute axis, per-arm parameters with seed intervals, the comparison rule,
"no fit" rows, the tables in every format and the figure."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ablate.presets import baseline
from ablate.report import curve_tables, curves, figures, render
from ablate.report.build import build_tables
from ablate.report.curve_calibration import CurveModel, simulate_seed
from ablate.testing import study_data
from ablate.trial import CurveSpec

REF = dataclasses.replace(baseline("grpo"), kl_coef=0.0, minibatches=4)
ALGOS = {name: REF for name in ("grpo", "higher_a", "steeper", "flat")}
SPEC = CurveSpec(axis="generated_tokens", warmup=50_000, target=0.6)
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
    return curves.arm_curves(data, SPEC)


def test_eval_points_read_compute_at_each_eval_and_zero_before_training(data):
    points = curves.eval_points(data, SPEC)
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
    rows = {r.arm: r for r in curves.contrasts(arms, "grpo", SPEC)}
    assert rows["higher_a"].a_differs and rows["higher_a"].delta_a.diff.value > 0.05
    assert rows["higher_a"].b_ratio is None  # A decides: B is not compared
    steeper = rows["steeper"]
    assert not steeper.a_differs and steeper.p_b < 0.05
    assert steeper.b_ratio.low <= 2.0 <= steeper.b_ratio.high  # B 2.4 vs 1.2
    assert "B higher" in curve_tables._verdict(steeper)
    assert rows["flat"].delta_a.n == 0 and "too few seeds" in curve_tables._verdict(rows["flat"])


def test_tables_render_in_every_format_and_the_report_places_them_after_the_headline(data):
    built = build_tables(data)
    names = [t.name for t in built.tables]
    assert names[2:4] == ["compute_curves", "compute_curve_contrasts"]
    table = built.tables[2]
    row = next(r for r in table.rows if r["arm"] == "flat")
    assert row["fitted"] == "0/3" and "no fit" in row["no fit"]
    for text in (render.to_markdown(table), render.to_latex(table)):
        assert "C\\_mid" in text or "C_mid" in text
    frame = render.to_frame(table)
    assert {"A", "A low", "A high", "B", "C_mid", "forecast RMSE", "compute to 0.6"} <= set(frame)
    assert built.findings["Compute–performance curves"]


def test_the_figure_is_drawn_and_saved_as_png_and_pdf(data, tmp_path):
    assert figures.FIGURES["compute_curves"] is curve_tables.draw  # write_figures saves it
    plt = figures._plt()
    fig, ax = plt.subplots()
    assert curve_tables.draw(data, ax)
    labels = [t.get_text() for t in ax.legend().get_texts()]
    assert any(label.startswith("grpo: A=0.85") for label in labels)
    assert "flat: no fit" in labels
    for ext in ("png", "pdf"):
        fig.savefig(tmp_path / f"compute_curves.{ext}")
        assert (tmp_path / f"compute_curves.{ext}").stat().st_size > 0
    plt.close(fig)


def test_without_a_curve_spec_the_report_has_no_curve_section(data):
    plain = dataclasses.replace(data, curves=None)
    assert curve_tables.curve_section(plain) == ([], [])


def test_curve_intervals_cover_in_a_small_simulation():
    """The full check (1,000 studies per row, README) is `python -m
    ablate.report.curve_calibration 1000`; here 20 studies, coverage within its MC error."""
    from ablate.report.curve_calibration import coverage

    got = coverage(CurveModel(), seeds=3, studies=20)
    for key in ("A coverage", "B coverage", "C_mid coverage"):
        assert got[key] >= 0.75, got  # 0.95 less 4 binomial SDs of 20 studies
    assert got["refused fits"] < 0.15


@pytest.mark.slow
@pytest.mark.parametrize("seeds", [3, 5])
def test_curve_intervals_are_calibrated_at_the_seed_counts_users_run(seeds):
    from ablate.report.curve_calibration import SCENARIOS, coverage

    for model in SCENARIOS.values():
        got = coverage(model, seeds=seeds, studies=300)
        for key in ("A coverage", "B coverage", "C_mid coverage"):
            assert abs(got[key] - 0.95) <= 3 * got["MC error"] + 0.005, (key, got)
