"""The report's figures (matplotlib, Agg backend), each saved as PNG and PDF, every arm in its
colour from `palette` in every figure.

Figures of their own layout (`PANELS`: the forest plot, the learning curves as small multiples,
base-model selection) come first, the forest plot leading (the section list, `sections`, shows
it right after the findings; length and entropy as small multiples, `trajectories`); then
single-panel ones (`FIGURES`)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from ablate.report.curves import section
from ablate.report.data.load import StudyData
from ablate.report.render import forest, multiples, selection, trajectories
from ablate.report.render.palette import NEUTRAL, study_styles
from ablate.report.render.trajectories import band as _band  # noqa: F401  (tests read it here)
from ablate.report.stats import measures as m


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _learning_by_tokens(data: StudyData, ax) -> bool:
    """Every finished trial's eval pass@1 against the tokens it had generated (one thin line per
    seed): what each arm bought with its compute, without averaging over unequal x."""
    joined = m.eval_by_tokens(data.history)
    joined = joined[joined["trial_id"].isin(data.complete()["trial_id"])]
    if not len(joined):
        return False
    cells = data.trials.set_index("trial_id")[["arm", "model", "template"]]
    styles, labelled = study_styles(data), set()
    for trial_id, curve in joined.groupby("trial_id", sort=False):
        key = tuple(cells.loc[trial_id])
        label = None if key in labelled else " · ".join(key)
        labelled.add(key)
        style = styles[key[0]]
        ax.plot(curve["tokens"], curve["value"], style.line, lw=0.8, color=style.color, label=label)
    ax.set(xlabel="generated training tokens", ylabel="eval pass@1", title="pass@1 vs compute")
    return True


def _ratio_variance(data: StudyData, ax) -> bool:
    keys = ["length/mean", "policy/ratio_var", "policy/seq_ratio_var"]
    h = data.history[
        data.history["metric"].isin(keys)
        & data.history["trial_id"].isin(data.complete()["trial_id"])
    ]
    wide = h.pivot_table(index=["trial_id", "step"], columns="metric", values="value")
    if not set(keys) <= set(wide.columns):
        return False
    ax.scatter(wide[keys[0]], wide[keys[1]], s=10, label="token ratio")
    ax.scatter(wide[keys[0]], wide[keys[2]], s=10, marker="x", label="sequence ratio")
    ax.set(
        xlabel="mean completion length (tokens)",
        ylabel="ratio variance",
        title="Ratio variance vs length",
    )
    return True


#: Marker per base model in the pass@k figure (the bases are told apart by marker, not colour:
#: colour is the arm's).
BASE_MARKERS = ("o", "s", "^", "v", "D", "P", "X")


def _passk_curves(data: StudyData, ax) -> bool:
    drew = False
    cells = data.passk.groupby(["model", "template"]) if len(data.passk) else []
    for i, ((model, template), cell) in enumerate(cells):
        cell = cell.sort_values("k")
        marker = BASE_MARKERS[i % len(BASE_MARKERS)]
        ax.plot(cell["k"], cell["pass_at_k"], "--", marker=marker, color=NEUTRAL, alpha=0.7, ms=3,
                label=f"base {model} · {template}")  # fmt: skip
        drew = True
    ks, styles = m.eval_ks(data.history), study_styles(data)
    for arm, model, template in m.cells(data):
        means = [
            np.nanmean(
                m.by_seed(
                    data, m.final_value(data.history, f"eval/pass_at_{k}"), arm, model, template
                )
            )
            if len(data.complete())
            else np.nan
            for k in ks
        ]
        if ks and np.isfinite(means).any():
            color = styles[arm].color
            ax.plot(ks, means, "-s", color=color, label=f"{arm} · {model} · {template}")
            drew = True
    ax.set(xlabel="k", ylabel="pass@k", xscale="log", title="pass@k: base (dashed) vs trained")
    _k_ticks(ax, sorted({*ks, *(data.passk["k"] if len(data.passk) else [])}))
    return drew


def _k_ticks(ax, ks: list) -> None:
    """One labelled tick per power of two that was measured, none between: a log axis's
    default labels (10^0, 2×10^0, …) run into one another."""
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator, ScalarFormatter

    shown = [k for k in ks if k > 0 and (int(k) & (int(k) - 1)) == 0] or list(ks)
    ax.xaxis.set_major_locator(FixedLocator(shown))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())


FIGURES: dict[str, Callable] = {
    "learning_curves_by_tokens": _learning_by_tokens,
    "ratio_variance_vs_length": _ratio_variance,
    "pass_at_k": _passk_curves,
    "compute_curves": section.draw,
}

#: Figures that lay out their own panels: `figure(data, plt, axis)` -> a Figure or None.
PANELS: dict[str, Callable] = {
    "forest_plot": forest.figure,
    "learning_curves": multiples.figure,
    "base_model_selection": selection.figure,
    "length_by_correctness": trajectories.length_figure,
    "entropy": trajectories.entropy_figure,
}
#: What each figure shows, for a reader: the report's caption and the image's alt text.
CAPTIONS = {
    "forest_plot": "Every contrast: Δ pass@1 against the reference with its interval, the "
    "equivalence band and the verdict",
    "learning_curves": "Learning curves per base model and template, with the difference to the "
    "reference below",
    "base_model_selection": "Base-model selection: RL gain against the share of prompts with "
    "mixed groups and against base pass@1, beside the base models' pass@k",
    "learning_curves_by_tokens": "Eval pass@1 against generated training tokens, one line per seed",
    "length_by_correctness": "Completion length of correct and incorrect answers during training",
    "entropy": "Token entropy during training",
    "ratio_variance_vs_length": "Importance-ratio variance against completion length",
    "pass_at_k": "pass@k before and after training",
    "compute_curves": "Eval pass@1 against compute with the fitted curves",
}


def caption(png: Path) -> str:
    """A figure file's caption (its name for a figure without one)."""
    return CAPTIONS.get(png.stem, png.stem.replace("_", " "))


def _save(fig, folder: Path, name: str) -> Path:
    fig.savefig(folder / f"{name}.png", dpi=120)
    fig.savefig(folder / f"{name}.pdf")
    return folder / f"{name}.png"


def drawn_figures(data: StudyData, plt, axis: str | None = None) -> Iterator[tuple[str, object]]:
    """(name, matplotlib Figure) for every figure that has data, the lead figures first; the
    caller closes each."""
    for name, make in PANELS.items():
        fig = make(data, plt, axis)
        if fig is not None:
            yield name, fig
    for name, draw in FIGURES.items():
        fig, ax = plt.subplots(figsize=(8.4, 4.2))
        if draw(data, ax):
            # beside the plot, not over its lines
            ax.legend(fontsize=6, loc="center left", bbox_to_anchor=(1.01, 0.5))
            fig.tight_layout()
            yield name, fig
        else:
            plt.close(fig)


def write_figures(data: StudyData, folder: Path, axis: str | None = None) -> list[Path]:
    """Every figure that has data, as `<name>.png` and `<name>.pdf`; returns the PNG paths, the
    lead figures first. `axis`: the learning curves' x axis (a key of `multiples.AXES`; default
    the compute curves' axis, else the step)."""

    warnings.filterwarnings("ignore", "Mean of empty slice", RuntimeWarning)  # cells with no run
    plt = _plt()
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, fig in drawn_figures(data, plt, axis):
        try:
            written.append(_save(fig, folder, name))
        finally:
            plt.close(fig)
    return written
