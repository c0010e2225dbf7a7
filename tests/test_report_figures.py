"""The numbers behind the paper figures, on inputs checkable by hand: the palette, the forest
plot's rows (the contrast tables' rows), the learning curves' seed bands and paired differences,
the mixed share of a 0/1 matrix and the base-model selection's points, the compact headline
table. Figures written to disk are checked in tests/test_report_build.py."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from ablate.base.errors import ConfigError
from ablate.baselines import baseline
from ablate.factors.eval_spec import CurveSpec
from ablate.report.render import forest, multiples, palette, paper, selection
from ablate.report.render.tables import build_tables
from ablate.report.stats import contrasts as cx
from ablate.report.stats.inference import Estimate
from ablate.testing import study_data

REF = dataclasses.replace(baseline("grpo"), kl_coef=0.0)
ALGOS = {"grpo": REF, "better": dataclasses.replace(REF, clip_high=0.28), "again": REF}
BASE = [0.50, 0.52, 0.48, 0.51]
LIFT = {"grpo": [0, 0, 0, 0], "better": [0.10, 0.11, 0.09, 0.10], "again": [0.01, -0.01, 0, 0]}


def final(value: float) -> dict:
    return {"eval/pass_at_1": {0: 0.5, 10: value}, "budget/generated_tokens": {10: 10_000}}


def two_cells():
    """grpo, better and an A/A replicate on base m (4 seeds); grpo alone on base n (1 seed)."""
    runs = [(a, "m", s, final(BASE[s] + LIFT[a][s])) for a in ALGOS for s in range(4)]
    runs.append(("grpo", "n", 0, final(0.2)))
    return study_data(
        runs, algorithms=ALGOS, reference="grpo", replicates={"again": "grpo"}, group_size=4
    )


# --- palette ---------------------------------------------------------------------------------
def test_each_arm_keeps_its_colour_whatever_figure_shows_it():
    styles = palette.arm_styles(["grpo", "dr_grpo", "dapo"])
    assert [s.color for s in styles.values()] == list(palette.OKABE_ITO[:3])
    assert palette.arm_styles(["grpo", "dr_grpo", "dapo"]) == styles  # stable between calls
    data = two_cells()
    study = palette.study_styles(data)  # the study's declared order, not a figure's subset
    assert list(study) == ["grpo", "better", "again"]
    assert study["better"].color == palette.OKABE_ITO[1]


def test_colours_are_distinct_and_line_styles_take_over_past_eight_arms():
    assert len(set(palette.OKABE_ITO)) == 8
    styles = palette.arm_styles([f"arm{i}" for i in range(24)])
    assert len({(s.color, s.line) for s in styles.values()}) == 24
    assert (styles["arm8"].color, styles["arm8"].line) == (palette.OKABE_ITO[0], "--")
    assert len({styles[f"arm{i}"].color for i in range(8)}) == 8


# --- forest plot and compact table -----------------------------------------------------------
def test_forest_rows_are_the_contrast_tables_rows():
    data = two_cells()
    rows = forest.forest_rows(data)
    tables = {t.name: t for t in build_tables(data).tables}
    main = [r for r in tables["main"].rows if isinstance(r["Δ pass@1"], Estimate)]
    steps = [r for r in rows if r.kind == cx.STEPS]
    assert [r.arm for r in steps] == [r["arm"] for r in main] == ["better"]
    for f, t in zip(steps, main, strict=True):
        d = t["Δ pass@1"]
        assert (f.value, f.low, f.high) == (d.value, d.low, d.high)
        assert (f.p_holm, f.verdict) == (t["p (Holm)"], t["verdict"])
    assert f.value == pytest.approx(0.10) and f.verdict == cx.DIFFERENT
    (aa,) = [r for r in rows if r.kind == cx.AA]
    control = tables["controls"].rows[0]
    assert (aa.arm, aa.value, aa.verdict) == ("again", control["Δ pass@1"].value, "inconclusive")
    assert aa.label == "again vs grpo (A/A)"
    # the 90% interval TOST reads lies inside the 95% one
    assert f.low < f.low90 < f.value < f.high90 < f.high
    headline = tables["headline"].rows
    assert [(r["arm"], r["Δ pass@1"].value, r["verdict"]) for r in headline] == [
        (f.arm, f.value, f.verdict)
    ]
    assert "base" not in headline[0]  # one cell has contrasts: no cell column


def test_forest_extent_covers_every_interval_zero_and_the_band():
    row = forest.ForestRow("m · plain", "a", "r", cx.STEPS, 0.2, 0.1, 0.3, 0.12, 0.28, 0.01,
                           cx.DIFFERENT, 4)  # fmt: skip
    lo, hi = forest.extent([row], margin=0.05)
    assert lo < -0.05 and hi > 0.3
    assert forest.verdict_text(row) == "different, p=0.01"
    assert forest.verdict_text(dataclasses.replace(row, verdict="", n=2)) == "no test (n=2)"


# --- learning curves -------------------------------------------------------------------------
def frame(rows) -> pd.DataFrame:
    cols = ["arm", "model", "template", "seed", "key", "x", "value"]
    return pd.DataFrame(rows, columns=cols)


def test_seed_bands_are_the_mean_and_t_interval_over_seeds_at_shared_evals():
    rows = [("a", "m", "t", s, "step 0", 0.0, v) for s, v in enumerate([0.2, 0.4, 0.6])]
    rows += [("a", "m", "t", s, "step 5", 5.0, 0.5) for s in range(2)]  # seed 2 missing: dropped
    bands = multiples.seed_bands(frame(rows))
    assert len(bands) == 1
    half = sps.t.ppf(0.975, 2) * 0.2 / np.sqrt(3)
    band = bands.iloc[0]
    assert band["mean"] == pytest.approx(0.4) and band["n"] == 3
    assert band["low"] == 0.0  # 0.4 − 0.497 clipped to the range of pass@1
    assert band["high"] == pytest.approx(0.4 + half)


def test_deltas_pair_seeds_and_evals_both_arms_share():
    rows = []
    for s, (ref, arm) in enumerate([(0.1, 0.2), (0.2, 0.4), (0.3, 0.3)]):
        rows += [("ref", "m", "t", s, "mark 100", 100.0 + s, ref)]
        rows += [("b", "m", "t", s, "mark 100", 110.0 + s, arm)]
    rows += [("b", "m", "t", 9, "mark 100", 110.0, 0.9)]  # a seed the reference lacks: unpaired
    d = multiples.delta_bands(frame(rows), "ref")
    assert list(d["arm"]) == ["b"]
    # seed 9 has the key too, so it survives b's own band; the pair uses seeds 0-2 only
    half = sps.t.ppf(0.975, 2) * np.std([0.1, 0.2, 0.0], ddof=1) / np.sqrt(3)
    assert d["mean"].iloc[0] == pytest.approx(0.1) and d["n"].iloc[0] == 3
    assert d["high"].iloc[0] == pytest.approx(0.1 + half)
    assert d["x"].iloc[0] == pytest.approx((111 + 101) / 2)  # both arms' mean x, paired seeds


def test_the_learning_axis_follows_the_compute_curves_and_falls_back_to_steps():
    data = two_cells()
    assert multiples.learning_axis(data) == "step"
    with_curves = dataclasses.replace(data, curves=CurveSpec(axis="model_flops"))
    assert multiples.learning_axis(with_curves) == "model_flops"
    assert multiples.learning_axis(with_curves, "generated_tokens") == "generated_tokens"
    _, drawn = multiples.eval_frame(data, "model_flops")  # never logged here
    assert drawn == "step"
    tokens, drawn = multiples.eval_frame(data, "generated_tokens")
    assert drawn == "generated_tokens" and set(tokens["x"]) == {0.0, 10_000.0}
    multiples.check_axis(None), multiples.check_axis("model_flops")
    with pytest.raises(ConfigError, match="'flops' is not one of step, generated_tokens"):
        multiples.check_axis("flops")


# --- base-model selection --------------------------------------------------------------------
def test_mixed_share_of_a_hand_made_matrix():
    correct = np.array([[1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 0, 0], [0, 1, 1, 0]])
    assert selection.mixed_share(correct, 4) == pytest.approx(0.5)  # n = G: rows 3 and 4
    # G = 2 from 4 samples: row 3 mixes in 3 of 6 pairs, row 4 in 4 of 6
    assert selection.mixed_share(correct, 2) == pytest.approx((3 / 6 + 4 / 6) / 4)
    assert np.isnan(selection.mixed_share(correct, 8))  # fewer samples than G
    assert np.isnan(selection.mixed_share(np.empty((0, 4)), 4))


def test_step0_matrix_takes_one_trial_per_seed_and_the_mixed_share_from_it():
    data = two_cells()
    outcomes = {0: [[1, 0], [1, 1]], 1: [[0, 0], [1, 0]]}  # seed -> [problem][sample]
    rows = []
    for t in data.trials.itertuples():
        for j, row in enumerate(outcomes.get(t.seed, [])):
            rows += [
                dict(trial_id=t.trial_id, model=t.model, template=t.template, seed=t.seed,
                     step=0, problem_id=f"p{j}", sample=k, correct=bool(c))
                for k, c in enumerate(row)
            ]  # fmt: skip
    data = dataclasses.replace(data, samples=pd.DataFrame(rows))
    y = selection.step0_matrix(data, "m", "plain")
    assert y.tolist() == [[1, 0, 0, 0], [1, 1, 1, 0]]  # seeds side by side, arms not repeated
    assert selection.cell_mixed_share(data, "m", "plain") == pytest.approx(
        selection.mixed_share(y, 4)
    )
    passk = pd.DataFrame(
        [dict(model="m", template="plain", k=4, pass_at_k=0.9, signal_fraction=-1e-17),
         dict(model="m", template="plain", k=1, pass_at_k=0.3, signal_fraction=0.0)]
    )  # fmt: skip
    with_phase = dataclasses.replace(data, passk=passk)
    assert selection.cell_mixed_share(with_phase, "m", "plain") == 0.0  # the phase's, ≥ 0
    assert selection.cell_pass1(with_phase, "m", "plain") == 0.3


def test_selection_points_are_per_model_gains_without_the_controls():
    data = two_cells()
    assert selection.selection_arms(data) == ["grpo"]  # the one arm on both bases
    frame = selection.selection_frame(data)
    assert list(zip(frame["arm"], frame["model"], strict=True)) == [("grpo", "m"), ("grpo", "n")]
    m_row = frame.iloc[0]
    gains = np.array(BASE) - 0.5
    half = sps.t.ppf(0.975, 3) * gains.std(ddof=1) / 2
    assert m_row["gain"] == pytest.approx(gains.mean()) and m_row["seeds"] == 4
    assert m_row["high"] == pytest.approx(gains.mean() + half)
    n_row = frame.iloc[1]
    assert n_row["gain"] == pytest.approx(-0.3) and np.isnan(n_row["low"])  # one seed
    assert n_row["base_pass1"] == pytest.approx(0.5)  # its step-0 eval


def test_the_paper_tex_puts_the_compact_table_first_and_headings_on_the_rest():
    built = build_tables(two_cells())
    tex = paper.paper_tex(built.tables)
    assert tex.index("tab:headline") < tex.index(paper.APPENDIX) < tex.index("tab:main")
    assert "\\caption{\\textbf{Final pass@1 and every contrast to the reference.}" in tex
    assert "\\textbf{main.}" not in tex


def test_every_panel_figure_draws_arms_in_their_palette_colours_only():
    from matplotlib.colors import to_hex

    from ablate.report.render import figures

    data, plt = two_cells(), figures._plt()
    allowed = {s.color.lower() for s in palette.study_styles(data).values()}
    allowed |= {palette.NEUTRAL, "#000000", "#ffffff"}  # zero lines, open markers
    for name, make in figures.PANELS.items():
        if name == "base_model_selection":
            continue  # its Pass@k panel colours base models, not arms (none here anyway)
        fig = make(data, plt, None)
        if name in ("length_by_correctness", "entropy"):  # no length or entropy logged here
            assert fig is None
            continue
        assert fig is not None, name
        colours = {to_hex(line.get_color()) for ax in fig.axes for line in ax.get_lines()}
        assert colours and colours <= allowed, (name, colours - allowed)
        plt.close(fig)
    fig = selection.figure(data, plt)
    # no Pass@G phase or step-0 samples here: no mixed share, so the base pass@1 panel
    lines = [line for line in fig.axes[1].get_lines() if line.get_marker() == "o"]
    assert {to_hex(line.get_color()) for line in lines} == {palette.OKABE_ITO[0].lower()}
    plt.close(fig)
