"""Base-model selection: which base model does RL help, and why. RL gain (final minus base eval
pass@1, mean over seeds with its 95% t interval, one labelled point per arm × base · template)
against two capability measures of the base model, beside its Pass@k curves:

- the mixed share: the share of prompts whose group of G samples (G = the study's group size) is
  mixed, neither all right nor all wrong; only those give a group-relative advantage anything to
  learn from. It separates rungs that base Pass@G cannot: a base right on nearly every prompt
  some of the time and one right on nearly every prompt every time both have Pass@G near 1,
  but only the first has mixed groups. It is the Pass@G phase's signal fraction at k = G
  (pass@G − pass^G averaged over prompts, estimated without bias from n ≥ G samples per prompt);
  without that phase, the same estimate from the base model's step-0 eval samples;
- base pass@1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ablate.base import passk
from ablate.report.data.load import StudyData
from ablate.report.render.palette import NEUTRAL, study_styles
from ablate.report.stats import inference
from ablate.report.stats import measures as m


def mixed_share(correct, group_size: int) -> float:
    """From a [prompts, n] 0/1 matrix: the expected share of prompts whose group of
    `group_size` samples is neither all right nor all wrong (unbiased for n ≥ group_size; with
    n == group_size exactly the share of such rows). NaN without prompts or with n < G."""
    correct = np.asarray(correct, dtype=bool)
    if correct.ndim != 2 or correct.shape[0] == 0 or correct.shape[1] < group_size:
        return float("nan")
    n = np.full(correct.shape[0], correct.shape[1])
    return float(passk.signal_probability(n, correct.sum(axis=1), group_size).mean())


def step0_matrix(data: StudyData, model: str, template: str) -> np.ndarray:
    """The base model's step-0 eval outcomes as [problems, samples]: one trial per seed (arms
    with the same seed start from the same weights and draw the same eval samples, so they would
    repeat one another), the seeds' samples side by side, problems every seed evaluated."""
    s = data.samples
    if not len(s):
        return np.empty((0, 0))
    s = s[(s["step"] == 0) & (s["model"] == model) & (s["template"] == template)]
    firsts = s.groupby("seed")["trial_id"].first()
    s = s[s["trial_id"].isin(firsts.to_numpy())]
    if not len(s):
        return np.empty((0, 0))
    wide = s.pivot_table(index="problem_id", columns=["seed", "sample"], values="correct")
    return wide.dropna().to_numpy(float)


def _passk_value(data: StudyData, model: str, template: str, k: int, column: str) -> float:
    p = data.passk
    if not len(p):
        return float("nan")
    row = p[(p["model"] == model) & (p["template"] == template) & (p["k"] == k)]
    return float(row[column].iloc[0]) if len(row) else float("nan")


def cell_mixed_share(data: StudyData, model: str, template: str) -> float:
    """The cell's mixed share at the study's G: the Pass@G phase's, else the step-0 eval's."""
    g = data.group_size
    share = _passk_value(data, model, template, g, "signal_fraction")
    if math.isfinite(share):
        return max(share, 0.0)  # pass@G − pass^G at float precision can read −1e-17
    return mixed_share(step0_matrix(data, model, template), g)


def cell_pass1(data: StudyData, model: str, template: str) -> float:
    """Base pass@1: the Pass@G phase's, else the mean of the cell's step-0 evals."""
    value = _passk_value(data, model, template, 1, "pass_at_k")
    if math.isfinite(value):
        return value
    t = data.trials
    ids = t[(t["model"] == model) & (t["template"] == template)]["trial_id"]
    base = m.base_value(data, 1).reindex(ids.to_numpy()).dropna()
    return float(base.mean()) if len(base) else float("nan")


@dataclass(frozen=True)
class GainPoint:
    arm: str
    model: str
    template: str
    gain: inference.Estimate  # over seeds; no interval below MIN_SEEDS
    mixed: float
    pass1: float


def selection_arms(data: StudyData) -> list[str]:
    """The arms a selection curve compares base models on: those run on more than one base ·
    template cell (all arms when none is), never a control (an A/A replicate or the positive
    control: they calibrate the study, they are not algorithms to choose a base model for)."""
    controls = {*data.replicates, data.positive_control}
    cells = m.cells(data)
    arms = [a for a in dict.fromkeys(c[0] for c in cells) if a not in controls]
    spread = [a for a in arms if sum(c[0] == a for c in cells) > 1]
    return spread or arms


def gain_points(data: StudyData) -> list[GainPoint]:
    """One point per selection arm × base · template with finished trials."""
    gains = m.gains(data, 1)
    done = data.complete().set_index("trial_id")
    arms, out = set(selection_arms(data)), []
    for arm, model, template in m.cells(data):
        if arm not in arms:
            continue
        ids = done[(done["arm"] == arm) & (done["model"] == model) & (done["template"] == template)]
        values = gains.reindex(ids.index).dropna().to_numpy()
        if not values.size:
            continue
        mixed, pass1 = cell_mixed_share(data, model, template), cell_pass1(data, model, template)
        out.append(GainPoint(arm, model, template, inference.t_interval(values), mixed, pass1))
    return out


def _label(point: GainPoint, templates: int) -> str:
    return f"{point.model} · {point.template}" if templates > 1 else point.model


def _draw_gains(ax, points: list[GainPoint], x_of, styles, xlabel: str) -> bool:
    shown = [p for p in points if math.isfinite(x_of(p))]
    labelled: set[tuple[str, str]] = set()
    templates = len({p.template for p in points})
    for i, p in enumerate(sorted(shown, key=x_of)):
        est, color = p.gain, styles[p.arm].color
        err = None
        if math.isfinite(est.low):
            err = [[est.value - est.low], [est.high - est.value]]
        ax.errorbar(x_of(p), est.value, yerr=err, fmt="o", color=color, ms=5, capsize=3)
        if (p.model, p.template) not in labelled:
            labelled.add((p.model, p.template))
            ax.annotate(
                _label(p, templates),
                (x_of(p), est.value),
                xytext=(5, 6 - 14 * (i % 2)),
                textcoords="offset points",
                fontsize=7,
            )  # alternate: neighbours
    ax.axhline(0.0, color=NEUTRAL, lw=0.8)
    ax.set(xlabel=xlabel, ylabel="RL gain in eval pass@1 (mean ± 95%)", xlim=(-0.05, 1.05))
    return bool(shown)


def _draw_passk(ax, data: StudyData) -> bool:
    import matplotlib

    p = data.passk
    if not len(p):
        ax.text(0.5, 0.5, "no Pass@G phase", ha="center", transform=ax.transAxes, color=NEUTRAL)
        return False
    trained = set(zip(data.trials["model"], data.trials["template"], strict=True))
    cells = [(key, c) for key, c in p.groupby(["model", "template"], sort=False) if key in trained]
    cells = cells or list(p.groupby(["model", "template"], sort=False))
    colors = matplotlib.colormaps["viridis"](np.linspace(0.0, 0.85, len(cells)))
    for color, ((model, template), cell) in zip(colors, cells, strict=True):
        cell = cell.sort_values("k")
        ax.plot(
            cell["k"], cell["pass_at_k"], "-o", color=color, ms=3, label=f"{model} · {template}"
        )
    ax.axvline(data.group_size, color=NEUTRAL, lw=0.6, ls=":")
    ax.set(xscale="log", xlabel="k (dotted: G)", ylabel="base pass@k", ylim=(-0.02, 1.02))
    ax.legend(fontsize=6, frameon=False)
    return True


def figure(data: StudyData, plt, axis: str | None = None):
    """Gain vs mixed share | gain vs base pass@1 | base Pass@k; None with fewer than two base
    models (among the gains and Pass@k)."""
    points = gain_points(data)
    bases = {p.model for p in points} | (set(data.passk["model"]) if len(data.passk) else set())
    if len(bases) < 2:  # selection compares base models: with one there is nothing to select
        return None
    styles = study_styles(data)
    fig, axes = plt.subplots(1, 3, figsize=(12.0, 3.9))
    g = data.group_size
    mixed = f"share of prompts with a mixed group of G={g} (base model)"
    if not _draw_gains(axes[0], points, lambda p: p.mixed, styles, mixed):
        why = f"no mixed share: no Pass@G phase at k = {g}\nand under {g} step-0 samples a prompt"
        axes[0].text(0.5, 0.5, why, ha="center", transform=axes[0].transAxes, fontsize=7)
    _draw_gains(axes[1], points, lambda p: p.pass1, styles, "base pass@1")
    _draw_passk(axes[2], data)
    axes[0].set_title("RL gain vs mixed groups", fontsize=9)
    axes[1].set_title("RL gain vs base pass@1", fontsize=9)
    axes[2].set_title("Base models before RL (trained templates)", fontsize=9)
    _legend(fig, styles, {p.arm for p in points})
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    return fig


def _legend(fig, styles, present: set[str]) -> None:
    from matplotlib.lines import Line2D

    handles = [
        Line2D([], [], color=s.color, marker="o", ls="", label=arm)
        for arm, s in styles.items()
        if arm in present
    ]
    fig.legend(handles=handles, loc="upper center", ncol=max(len(handles), 1), fontsize=7,
               frameon=False)  # fmt: skip


def selection_frame(data: StudyData) -> pd.DataFrame:
    """The figure's numbers as a frame (tests, and a reader who wants them)."""
    rows = [
        dict(arm=p.arm, model=p.model, template=p.template, gain=p.gain.value, low=p.gain.low,
             high=p.gain.high, seeds=p.gain.n, mixed_share=p.mixed, base_pass1=p.pass1)
        for p in gain_points(data)
    ]  # fmt: skip
    return pd.DataFrame(rows)
