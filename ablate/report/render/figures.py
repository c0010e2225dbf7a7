"""The report's figures (matplotlib, Agg backend), each saved as PNG and PDF, every arm in its
colour from `palette` in every figure.

Figures of their own layout (`PANELS`: the forest plot, the learning curves as small multiples,
base-model selection) come first, the forest plot leading (the section list, `sections`, shows
it right after the findings); then single-panel ones (`FIGURES`), whose curves show the mean
over finished seeds with the report's calibrated interval as a band (Student t over seeds,
clipped to the measure's range; no band below 3 seeds) per arm × base model × template."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from ablate.report.curves import section
from ablate.report.data.load import StudyData
from ablate.report.render import forest, multiples, selection
from ablate.report.render.palette import NEUTRAL, study_styles
from ablate.report.stats import inference
from ablate.report.stats import measures as m


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


#: Measures bounded to [0, 1]: their bands are clipped there.
UNIT_RANGE_PREFIXES = ("eval/pass_at_", "reward/mean")


def _band(
    values: pd.DataFrame, bounds: tuple[float, float] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per x (index): mean and the 95% t interval over seeds (columns), clipped to `bounds`;
    NaN below MIN_SEEDS seeds."""
    mean = values.mean(axis=1).to_numpy()
    n = values.notna().sum(axis=1).to_numpy()
    sd = values.std(axis=1, ddof=1).to_numpy()
    half = np.where(n >= inference.MIN_SEEDS, inference.t_half_width(sd, np.maximum(n, 2)), np.nan)
    low, high = mean - half, mean + half
    if bounds is not None:
        low, high = np.clip(low, *bounds), np.clip(high, *bounds)
    return mean, low, high


def _curves(data: StudyData, metric: str, ax, label_suffix: str = "", style: str = "-") -> bool:
    done = data.complete()
    h = data.history[
        (data.history["metric"] == metric) & data.history["trial_id"].isin(done["trial_id"])
    ]
    drew, styles = False, study_styles(data)
    for (arm, model, template), cell in h.groupby(["arm", "model", "template"], sort=False):
        wide = cell.pivot_table(index="step", columns="seed", values="value")
        if wide.shape[1] > 1:  # token-cadence evals land on different steps per seed
            wide = wide[wide.notna().all(axis=1)]
        bounded = metric.startswith(UNIT_RANGE_PREFIXES)
        mean, low, high = _band(wide, (0.0, 1.0) if bounded else None)
        color = styles[arm].color
        label = f"{arm} · {model} · {template}{label_suffix} (N={wide.shape[1]})"
        ax.plot(wide.index, mean, style, color=color, label=label)
        ax.fill_between(wide.index, low, high, alpha=0.2, color=color)
        drew = True
    return drew


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


def _length(data: StudyData, ax) -> bool:
    ax.set(xlabel="step", ylabel="tokens", title="Length: correct (solid) vs incorrect (dashed)")
    a = _curves(data, "length/correct_mean", ax, " correct", "-")
    b = _curves(data, "length/incorrect_mean", ax, " incorrect", "--")
    return a or b


def _entropy(data: StudyData, ax) -> bool:
    ax.set(xlabel="step", ylabel="nats / token", title="Token entropy")
    return _curves(data, "entropy/mean", ax)


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


def _passk_curves(data: StudyData, ax) -> bool:
    drew = False
    for (model, template), cell in (
        data.passk.groupby(["model", "template"]) if len(data.passk) else []
    ):
        cell = cell.sort_values("k")
        ax.plot(cell["k"], cell["pass_at_k"], "--o", color=NEUTRAL, alpha=0.6, ms=3)
        ax.annotate(f"base {model} · {template}", (cell["k"].iloc[-1], cell["pass_at_k"].iloc[-1]),
                    fontsize=6, color=NEUTRAL)  # fmt: skip
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
    return drew


FIGURES: dict[str, Callable] = {
    "learning_curves_by_tokens": _learning_by_tokens,
    "length_by_correctness": _length,
    "entropy": _entropy,
    "ratio_variance_vs_length": _ratio_variance,
    "pass_at_k": _passk_curves,
    "compute_curves": section.draw,
}

#: Figures that lay out their own panels: `figure(data, plt, axis)` -> a Figure or None.
PANELS: dict[str, Callable] = {
    "forest_plot": forest.figure,
    "learning_curves": multiples.figure,
    "base_model_selection": selection.figure,
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


def write_figures(data: StudyData, folder: Path, axis: str | None = None) -> list[Path]:
    """Every figure that has data, as `<name>.png` and `<name>.pdf`; returns the PNG paths, the
    lead figures first. `axis`: the learning curves' x axis (a key of `multiples.AXES`; default
    the compute curves' axis, else the step)."""

    warnings.filterwarnings("ignore", "Mean of empty slice", RuntimeWarning)  # cells with no run
    plt = _plt()
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, make in PANELS.items():
        fig = make(data, plt, axis)
        if fig is not None:
            try:
                written.append(_save(fig, folder, name))
            finally:
                plt.close(fig)
    for name, draw in FIGURES.items():
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        try:
            if draw(data, ax):
                ax.legend(fontsize=6)
                fig.tight_layout()
                written.append(_save(fig, folder, name))
        finally:
            plt.close(fig)
    return written
