"""Learning curves as small multiples: one column per base · template cell, eval pass@1 of each
arm on top (its colour from `palette`, shared by every figure), arm − reference below.

An arm with at least `inference.MIN_SEEDS` finished seeds is drawn as the mean over seeds with
its 95% t band; one with fewer as one thin line per seed (a band from two seeds would be a
guess). Seeds are lined up on the evals they share: the same step on the step axis; on a compute
axis the same compute mark (evals made on reaching a token or FLOP count), else the same step,
at the seeds' mean compute. Every eval is marked with a dot, so straight segments between evals
read as what they are. Δ vs reference: per seed present in both arms (paired by seed: same data
order), arm − reference at the evals both share, mean with its 95% t band, the zero line and the
declared equivalence band. The x axis is the compute-curve figure's when the study declares
curves (`CurveSpec.axis`), else the step; `write_figures(axis=...)` chooses another."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ablate.base.errors import ConfigError
from ablate.factors.eval_spec import COMPUTE_AXES, CurveSpec
from ablate.report.curves.analysis import eval_points
from ablate.report.data.load import StudyData
from ablate.report.render.palette import BAND, NEUTRAL, study_styles
from ablate.report.stats import inference
from ablate.report.stats import measures as m

#: The x axes a learning curve can be drawn on, with their labels.
AXES = {
    "step": "RL step",
    "generated_tokens": "generated training tokens",
    "trained_tokens": "trained tokens",
    "model_flops": "model FLOPs",
    "wall_seconds": "wall-clock seconds",
}
CELL = ["model", "template"]
KEYS = ["arm", "model", "template"]


def check_axis(axis: str | None) -> None:
    """A learning-curve axis the report can draw (None: the default), else a ConfigError
    naming the ones it can."""
    if axis is not None and axis not in AXES:
        raise ConfigError(f"curve axis {axis!r} is not one of {', '.join(AXES)}")


def learning_axis(data: StudyData, requested: str | None = None) -> str:
    """The axis asked for, else the compute-curve figure's, else the step."""
    if requested:
        return requested
    return data.curves.axis if data.curves is not None else "step"


def eval_frame(data: StudyData, axis: str) -> tuple[pd.DataFrame, str]:
    """Every finished trial's evals: arm, model, template, seed, key (what seeds are lined up
    on), x (on `axis`), value (pass@1); and the axis drawn (the step when `axis` was not
    logged)."""
    info = data.trials.set_index("trial_id")[[*KEYS, "seed"]]
    if axis in COMPUTE_AXES:
        points = eval_points(data, CurveSpec(axis=axis))
        if len(points) and points["compute"].gt(0).any():
            by_mark = points["mark"].notna()
            points["key"] = np.where(
                by_mark, "mark " + points["mark"].astype(str), "step " + points["step"].astype(str)
            )
            points["x"] = points["compute"]
            return points.join(info, on="trial_id")[[*KEYS, "seed", "key", "x", "value"]], axis
    acc = m.curve(data.history, "eval/pass_at_1")
    acc = acc[acc["trial_id"].isin(data.complete()["trial_id"])]
    acc = acc.assign(key="step " + acc["step"].astype(str), x=acc["step"].astype(float))
    return acc.join(info, on="trial_id")[[*KEYS, "seed", "key", "x", "value"]], "step"


def _wide(cell: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(value, x) as key × seed frames over the keys every seed of `cell` has."""
    value = cell.pivot_table(index="key", columns="seed", values="value")
    x = cell.pivot_table(index="key", columns="seed", values="x")
    shared = value.notna().all(axis=1) & x.notna().all(axis=1)
    return value[shared], x[shared]


def _summary(values: pd.DataFrame, x: pd.Series, bounds) -> pd.DataFrame:
    est = [inference.t_interval(row.to_numpy()) for _, row in values.iterrows()]
    out = pd.DataFrame(
        {
            "x": x.to_numpy(float),
            "mean": [e.value for e in est],
            "low": [e.low for e in est],
            "high": [e.high for e in est],
            "n": values.shape[1],
        }
    )
    if bounds is not None:
        out[["low", "high"]] = out[["low", "high"]].clip(*bounds)
    return out.sort_values("x", ignore_index=True)


def seed_bands(frame: pd.DataFrame) -> pd.DataFrame:
    """Per arm × cell and shared eval: x (mean over seeds), the mean pass@1 over seeds, its 95%
    t interval clipped to [0, 1] (NaN below MIN_SEEDS) and the seeds n."""
    parts = []
    for (arm, model, template), cell in frame.groupby(KEYS, sort=False):
        value, x = _wide(cell)
        summary = _summary(value, x.mean(axis=1), (0.0, 1.0))
        parts.append(summary.assign(arm=arm, model=model, template=template))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def delta_bands(frame: pd.DataFrame, reference: str) -> pd.DataFrame:
    """Per arm other than `reference` × cell and eval both share: arm − reference paired by
    seed, its mean over the seeds both have with the 95% t interval (NaN below MIN_SEEDS), x the
    mean of both arms' x, and n."""
    parts = []
    for (model, template), cell in frame.groupby(CELL, sort=False):
        ref = cell[cell["arm"] == reference]
        if not len(ref):
            continue
        ref_value, ref_x = _wide(ref)
        for arm, rows in cell[cell["arm"] != reference].groupby("arm", sort=False):
            value, x = _wide(rows)
            seeds = value.columns.intersection(ref_value.columns)
            keys = value.index.intersection(ref_value.index)
            if not len(seeds) or not len(keys):
                continue
            d = value.loc[keys, seeds] - ref_value.loc[keys, seeds]
            mid = (x.loc[keys, seeds].mean(axis=1) + ref_x.loc[keys, seeds].mean(axis=1)) / 2
            parts.append(_summary(d, mid, None).assign(arm=arm, model=model, template=template))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def _cells(data: StudyData) -> list[tuple[str, str]]:
    return list(dict.fromkeys((model, t) for _, model, t in m.cells(data)))


def _select(frame: pd.DataFrame, model: str, template: str) -> pd.DataFrame:
    if not len(frame):
        return frame
    return frame[(frame["model"] == model) & (frame["template"] == template)]


def _draw_curves(ax, cell_frame: pd.DataFrame, bands: pd.DataFrame, styles) -> None:
    for arm, band in bands.groupby("arm", sort=False):
        style = styles[arm]
        if band["n"].iloc[0] >= inference.MIN_SEEDS:
            ax.plot(band["x"], band["mean"], style.line, color=style.color, marker=".", ms=4)
            ax.fill_between(band["x"], band["low"], band["high"], color=style.color, alpha=0.18)
            continue
        for _, seed in cell_frame[cell_frame["arm"] == arm].groupby("seed"):
            seed = seed.sort_values("x")
            ax.plot(seed["x"], seed["value"], style.line, color=style.color, lw=0.8, marker=".")


def _draw_delta(ax, deltas: pd.DataFrame, styles, margin: float | None) -> bool:
    if not len(deltas):  # a cell with the reference alone (a rung of a selection curve)
        ax.axis("off")
        ax.text(0.5, 0.5, "reference arm only: no Δ", ha="center", va="center",
                transform=ax.transAxes, fontsize=8, color=NEUTRAL)  # fmt: skip
        return False
    if margin:
        ax.axhspan(-margin, margin, color=BAND, zorder=0)
    ax.axhline(0.0, color=NEUTRAL, lw=0.8)
    for arm, band in deltas.groupby("arm", sort=False):
        style = styles[arm]
        ax.plot(band["x"], band["mean"], style.line, color=style.color, marker=".", ms=4)
        ax.fill_between(band["x"], band["low"], band["high"], color=style.color, alpha=0.18)
    return True


#: Cells per row of panels.
COLUMNS = 4


def figure(data: StudyData, plt, axis: str | None = None):
    """The small multiples, or None when no finished trial has an eval."""
    from matplotlib.ticker import EngFormatter

    frame, drawn = eval_frame(data, learning_axis(data, axis))
    if not len(frame):
        return None
    cells, styles = _cells(data), study_styles(data)
    bands, deltas = seed_bands(frame), delta_bands(frame, data.reference_arm)
    ncols = min(len(cells), COLUMNS)
    blocks = -(-len(cells) // ncols)
    fig, axes = plt.subplots(
        2 * blocks,
        ncols,
        figsize=(max(3.4 * ncols + 1.6, 6.4), 4.2 * blocks),  # one cell: room for the title
        squeeze=False,
        gridspec_kw={"height_ratios": [2, 1] * blocks},
    )
    for i in range(blocks * ncols):
        top, bottom = axes[2 * (i // ncols), i % ncols], axes[2 * (i // ncols) + 1, i % ncols]
        if i >= len(cells):
            top.set_visible(False), bottom.set_visible(False)
            continue
        model, template = cells[i]
        _draw_curves(top, _select(frame, model, template), _select(bands, model, template), styles)
        drew = _draw_delta(bottom, _select(deltas, model, template), styles, data.margin)
        bottom.sharex(top)
        top.set_title(f"{model} · {template}", fontsize=9)
        top.set_ylim(-0.02, 1.02)  # one scale for every cell: rungs differ in level
        top.set_ylabel("eval pass@1" if i % ncols == 0 else "")
        bottom.set_ylabel(f"Δ vs {data.reference_arm}" if i % ncols == 0 else "")
        (bottom if drew else top).set_xlabel(AXES.get(drawn, drawn), fontsize=8)
        if drawn != "step":  # 60k, 1.2M, 3G: long counts would run into one another
            top.xaxis.set_major_formatter(EngFormatter(sep=""))
    _legend(fig, styles, set(frame["arm"]), data.margin)
    fig.suptitle(
        "Learning curves: mean ± 95% band (≥3 seeds), thin lines: single seeds", fontsize=10
    )
    fig.tight_layout(rect=(0, 0, 1 - 1.5 / fig.get_figwidth(), 0.95))  # 1.5 in: the legend
    return fig


def _legend(fig, styles, present: set[str], margin: float | None) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [
        Line2D([], [], color=s.color, ls=s.line, marker=".", label=arm)
        for arm, s in styles.items()
        if arm in present
    ]
    if margin:
        handles.append(Patch(color=BAND, label=f"equivalence ±{margin:g}"))
    fig.legend(handles=handles, loc="center right", fontsize=7, frameon=False)
