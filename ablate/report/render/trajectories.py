"""Training trajectories as small multiples: one panel per arm × base × template, one shared
scale, the reference arm's mean as a grey ghost in every other panel, instead of every arm's
band drawn over the others (six overlapping bands read as none). Each curve is the mean over
finished seeds with the report's calibrated interval as a band (Student t over seeds, clipped to
the measure's range; no band below 3 seeds)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ablate.report.data.load import StudyData
from ablate.report.render.palette import NEUTRAL, study_styles
from ablate.report.stats import inference

#: Measures bounded to [0, 1]: their bands are clipped there.
UNIT_RANGE_PREFIXES = ("eval/pass_at_", "reward/mean")
#: Panels per row of small multiples.
COLUMNS = 4


def band(
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


@dataclass(frozen=True)
class Trace:
    """One measure drawn in every panel: its metric key, its legend name and line style."""

    metric: str
    name: str
    line: str = "-"


def seed_table(data: StudyData, metric: str) -> dict[tuple, pd.DataFrame]:
    """(arm, model, template) -> step × seed values of `metric`, finished trials only."""
    done = data.complete()["trial_id"]
    h = data.history[(data.history["metric"] == metric) & data.history["trial_id"].isin(done)]
    out = {}
    for key, cell in h.groupby(["arm", "model", "template"], sort=False):
        wide = cell.pivot_table(index="step", columns="seed", values="value")
        if wide.shape[1] > 1:  # token-cadence evals land on different steps per seed
            wide = wide[wide.notna().all(axis=1)]
        out[key] = wide
    return out


def _draw(ax, wide: pd.DataFrame, trace: Trace, color: str, ghost: bool = False) -> None:
    bounded = trace.metric.startswith(UNIT_RANGE_PREFIXES)
    mean, low, high = band(wide, (0.0, 1.0) if bounded else None)
    if ghost:
        ax.plot(wide.index, mean, trace.line, color=NEUTRAL, lw=0.8, alpha=0.7, zorder=1)
        return
    ax.plot(wide.index, mean, trace.line, color=color, lw=1.2, zorder=3)
    ax.fill_between(wide.index, low, high, alpha=0.2, color=color, lw=0, zorder=2)


def figure(data: StudyData, plt, traces: tuple[Trace, ...], title: str, ylabel: str):
    """The small multiples of `traces`, or None when no finished trial logged any of them."""
    tables = {t: seed_table(data, t.metric) for t in traces}
    keys = list(dict.fromkeys(k for table in tables.values() for k in table))
    if not keys:
        return None
    styles, several = study_styles(data), len({k[1:] for k in keys}) > 1
    ncols = min(len(keys), COLUMNS)
    nrows = -(-len(keys) // ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(2.7 * ncols + 0.6, 2.1 * nrows + 1.1), sharex=True, sharey=True,
        squeeze=False,
    )  # fmt: skip
    for i, ax in enumerate(axes.flat):
        if i >= len(keys):
            ax.set_visible(False)
            continue
        arm, model, template = keys[i]
        ghost = (data.reference_arm, model, template)
        for trace, table in tables.items():
            if ghost in table and ghost != keys[i]:
                _draw(ax, table[ghost], trace, NEUTRAL, ghost=True)
            if keys[i] in table:
                _draw(ax, table[keys[i]], trace, styles[arm].color)
        n = max(table[keys[i]].shape[1] for table in tables.values() if keys[i] in table)
        where = f"\n{model} · {template}" if several else ""
        ax.set_title(f"{arm} (N={n}){where}", fontsize=8, loc="left")
        last_in_column = i + ncols >= len(keys)  # nothing drawn below: its x axis is labelled
        ax.tick_params(labelsize=7, labelbottom=last_in_column)
        ax.set_xlabel("step" if last_in_column else "", fontsize=8)
        ax.set_ylabel(ylabel if i % ncols == 0 else "", fontsize=8)
    _legend(fig, traces, data.reference_arm)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 0.97))
    return fig


def _legend(fig, traces: tuple[Trace, ...], reference: str) -> None:
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color="k", ls=t.line, label=t.name) for t in traces]
    handles.append(Line2D([], [], color=NEUTRAL, lw=0.8, label=f"{reference} (reference)"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=7, frameon=False)


LENGTH = (
    Trace("length/correct_mean", "correct answers", "-"),
    Trace("length/incorrect_mean", "incorrect answers", "--"),
)
ENTROPY = (Trace("entropy/mean", "token entropy"),)


def length_figure(data: StudyData, plt, axis: str | None = None):
    title = "Completion length of correct (solid) and incorrect (dashed) answers, mean ± 95% band"
    return figure(data, plt, LENGTH, title, "tokens")


def entropy_figure(data: StudyData, plt, axis: str | None = None):
    return figure(data, plt, ENTROPY, "Token entropy during training, mean ± 95% band", "nats")
