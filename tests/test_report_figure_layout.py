"""Figures made for reading: every figure of a report, rendered at the report's size, has no
text on top of other text and none cut off at the canvas edge (matplotlib's own layout, read
back with `get_window_extent`); the forest plot gives controls their own panel and scale; a
comparison figure appears only when its comparison exists; trajectories are small multiples."""

from __future__ import annotations

import dataclasses

import pytest

from ablate.baselines import baseline
from ablate.report.render import figures, forest, layout_check, selection, trajectories
from ablate.testing import study_data

REF = dataclasses.replace(baseline("grpo"), kl_coef=0.0)
ALGOS = {
    "grpo": REF,
    "clip_higher_and_overlong_buffer": dataclasses.replace(REF, clip_high=0.28),
    "dr_grpo_like": dataclasses.replace(REF, scale="none"),
    "grpo_random": dataclasses.replace(REF, reward_control="random"),
}


def _curves(arm: int, seed: int, final: float) -> dict:
    steps = range(0, 11)
    return {
        "eval/pass_at_1": {0: 0.5, 10: final},
        "eval/pass_at_2": {0: 0.6, 10: final + 0.1},
        "budget/generated_tokens": {10: 100_000 + 1_000 * seed},
        "length/correct_mean": {s: 30 + arm + s * 0.1 * seed for s in steps},
        "length/incorrect_mean": {s: 40 + arm - s * 0.1 for s in steps},
        "entropy/mean": {s: 0.5 - 0.01 * s * (arm + 1) for s in steps},
    }


def _study(models: tuple[str, ...]):
    """Three arms and a positive control (random rewards, −0.3) on `models`, 3 seeds."""
    lift = {"grpo": 0.0, "clip_higher_and_overlong_buffer": 0.01, "dr_grpo_like": -0.004}
    lift["grpo_random"] = -0.3
    runs = [
        (arm, model, seed, _curves(i, seed, 0.55 + lift[arm] + 0.01 * seed))
        for i, arm in enumerate(ALGOS)
        for model in models
        for seed in range(3)
    ]
    return study_data(
        runs, algorithms=ALGOS, reference="grpo", positive_control="grpo_random",
        equivalence_margin=0.02,
    )  # fmt: skip


@pytest.fixture(scope="module")
def plt():
    return figures._plt()


@pytest.mark.parametrize("models", [("rl_ready",), ("rl_ready", "saturated_base_model")])
def test_every_figure_reads_no_text_overlaps_or_runs_off_the_canvas(plt, models):
    drawn = dict(figures.drawn_figures(_study(models), plt))
    assert {"forest_plot", "learning_curves", "length_by_correctness", "entropy"} <= set(drawn)
    try:
        for name, fig in drawn.items():
            assert layout_check.layout_faults(fig) == [], name
    finally:
        for fig in drawn.values():
            plt.close(fig)


def test_the_layout_check_sees_overlapping_and_clipped_text(plt):
    fig, ax = plt.subplots(figsize=(4, 3))
    try:
        ax.set_title("a title long enough to run past the right edge of a small figure " * 2)
        ax.text(0.5, 0.5, "first label", transform=ax.transAxes)
        ax.text(0.52, 0.5, "second label", transform=ax.transAxes)
        faults = layout_check.layout_faults(fig)
        assert any("'first label' overlaps 'second label'" in f for f in faults)
        assert any("runs past the figure's edge" in f for f in faults)
    finally:
        plt.close(fig)


def test_the_forest_plot_draws_controls_in_a_panel_of_their_own_scale(plt):
    data = _study(("rl_ready",))
    laid = forest.panels(forest.forest_rows(data))
    assert [title for title, _, _ in laid] == ["rl_ready · plain", forest.CONTROLS_TITLE]
    assert [r.arm for r in laid[1][1]] == ["grpo_random"]
    fig = forest.figure(data, plt)
    try:
        primary, controls = fig.axes[0].get_xlim(), fig.axes[1].get_xlim()
        # the primary contrasts use the width: their range is set without the control's −0.3
        assert primary[0] > -0.1 and controls[0] < -0.3
    finally:
        plt.close(fig)


def test_base_model_selection_needs_two_base_models(plt):
    assert selection.figure(_study(("rl_ready",)), plt) is None
    fig = selection.figure(_study(("rl_ready", "saturated_base_model")), plt)
    assert fig is not None
    plt.close(fig)


def test_length_and_entropy_are_small_multiples_one_panel_per_arm_and_cell(plt):
    data = _study(("rl_ready", "saturated_base_model"))
    fig = trajectories.length_figure(data, plt)
    try:
        shown = [ax for ax in fig.axes if ax.get_visible()]
        assert len(shown) == len(ALGOS) * 2
        titles = [ax.get_title(loc="left") for ax in shown]
        assert "clip_higher_and_overlong_buffer (N=3)\nsaturated_base_model · plain" in titles
        own = [ln for ln in shown[1].get_lines() if ln.get_alpha() != 0.7]
        assert len(own) == 2  # correct and incorrect, in the arm's own colour
    finally:
        plt.close(fig)
