"""The report's figures (matplotlib, Agg backend), each saved as PNG and PDF.

Curves show the mean over finished seeds with the report's calibrated interval as a band (Student
t over seeds, clipped to the measure's range; no band below 3 seeds) per arm × base model ×
template."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from ablate.report.curves import section
from ablate.report.data.load import StudyData
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
    drew = False
    for (arm, model, template), cell in h.groupby(["arm", "model", "template"], sort=False):
        wide = cell.pivot_table(index="step", columns="seed", values="value")
        if wide.shape[1] > 1:  # token-cadence evals land on different steps per seed
            wide = wide[wide.notna().all(axis=1)]
        bounded = metric.startswith(UNIT_RANGE_PREFIXES)
        mean, low, high = _band(wide, (0.0, 1.0) if bounded else None)
        line = ax.plot(
            wide.index,
            mean,
            style,
            label=f"{arm} · {model} · {template}{label_suffix} (N={wide.shape[1]})",
        )
        ax.fill_between(wide.index, low, high, alpha=0.2, color=line[0].get_color())
        drew = True
    return drew


def _learning(data: StudyData, ax) -> bool:
    ax.set(xlabel="step", ylabel="eval pass@1", title="Learning curves")
    return _curves(data, "eval/pass_at_1", ax)


def _learning_by_tokens(data: StudyData, ax) -> bool:
    """Every finished trial's eval pass@1 against the tokens it had generated (one thin line per
    seed): what each arm bought with its compute, without averaging over unequal x."""
    joined = m.eval_by_tokens(data.history)
    joined = joined[joined["trial_id"].isin(data.complete()["trial_id"])]
    if not len(joined):
        return False
    cells = data.trials.set_index("trial_id")[["arm", "model", "template"]]
    colors: dict[tuple, str] = {}
    for trial_id, curve in joined.groupby("trial_id", sort=False):
        key = tuple(cells.loc[trial_id])
        label = None if key in colors else " · ".join(key)
        line = ax.plot(curve["tokens"], curve["value"], lw=0.8, color=colors.get(key), label=label)
        colors.setdefault(key, line[0].get_color())
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


def _gain_vs_passg(data: StudyData, ax) -> bool:
    ids = data.complete()["trial_id"]
    pg, gain = m.base_pass_at_g(data).reindex(ids), m.gains(data, 1).reindex(ids)
    ok = pg.notna() & gain.notna()
    if not ok.any():
        return False
    arms = data.complete().set_index("trial_id")["arm"]
    for arm in arms[ok[ok].index].unique():
        sel = ok[ok].index[arms[ok[ok].index] == arm]
        ax.scatter(pg[sel], gain[sel], label=arm)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set(
        xlabel=f"base Pass@{data.group_size}", ylabel="pass@1 gain", title="RL gain vs base Pass@G"
    )
    return True


def _passk_curves(data: StudyData, ax) -> bool:
    drew = False
    for (model, template), cell in (
        data.passk.groupby(["model", "template"]) if len(data.passk) else []
    ):
        cell = cell.sort_values("k")
        ax.plot(cell["k"], cell["pass_at_k"], "--o", label=f"base {model} · {template}")
        drew = True
    ks = m.eval_ks(data.history)
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
            ax.plot(ks, means, "-s", label=f"{arm} · {model} · {template}")
            drew = True
    ax.set(xlabel="k", ylabel="pass@k", xscale="log", title="pass@k: base (dashed) vs trained")
    return drew


FIGURES: dict[str, Callable] = {
    "learning_curves": _learning,
    "learning_curves_by_tokens": _learning_by_tokens,
    "length_by_correctness": _length,
    "entropy": _entropy,
    "ratio_variance_vs_length": _ratio_variance,
    "gain_vs_base_pass_at_g": _gain_vs_passg,
    "pass_at_k": _passk_curves,
    "compute_curves": section.draw,
}


def write_figures(data: StudyData, folder: Path) -> list[Path]:
    """Every figure that has data, as `<name>.png` and `<name>.pdf`; returns the PNG paths."""
    import warnings

    warnings.filterwarnings("ignore", "Mean of empty slice", RuntimeWarning)  # cells with no run
    plt = _plt()
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, draw in FIGURES.items():
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        try:
            if draw(data, ax):
                ax.legend(fontsize=6)
                fig.tight_layout()
                fig.savefig(folder / f"{name}.png", dpi=120)
                fig.savefig(folder / f"{name}.pdf")
                written.append(folder / f"{name}.png")
        finally:
            plt.close(fig)
    return written
