"""The compute–performance curves in the report: the table of A, B, C_mid, the checks and the
compute to the target per arm; the comparison table; their sentences; and the figure (pass@1
against compute on a log axis, seed bands, fitted sigmoids)."""

from __future__ import annotations

import math

import numpy as np

from ablate.report.curves.analysis import (
    ArmCurves,
    CurveContrast,
    arm_curves,
    contrasts,
    seed_interval,
    trial_curves,
    window,
)
from ablate.report.curves.check import at_ceiling
from ablate.report.curves.fit import fit_sigmoid, sigmoid
from ablate.report.data.load import StudyData
from ablate.report.data.memo import per_study
from ablate.report.data.table import Table, TableSpec
from ablate.report.stats import inference
from ablate.spec import CurveSpec


def _reasons(arm: ArmCurves) -> str:
    return "; ".join(f"seed {t.curve.seed}: {t.fit.reason}" for t in arm.fits if not t.fit.ok)


def _target_cell(arm: ArmCurves) -> object:
    # fitted seeds, and those refused at A's bound that reached the target inside their compute
    values = np.array([t.to_target for t in arm.fits if not np.isnan(t.to_target)])
    never = int(np.isinf(values).sum())
    if never:
        return f"not reached (A below the target) in {never}/{len(values)} seeds"
    return seed_interval(values, log=True)


def _forecast_cells(arm: ArmCurves) -> dict[str, object]:
    checked = [t.forecast for t in arm.fits if not t.forecast.reason]
    return {
        "forecast RMSE": seed_interval(np.array([f.rmse for f in checked])),
        "forecast departs": f"{sum(f.departs for f in checked)}/{len(checked)}",
    }


def _row(arm: ArmCurves, spec: CurveSpec) -> dict[str, object]:
    power = [t.power for t in arm.fits if not t.power.reason]
    row: dict[str, object] = {
        "arm": arm.arm,
        "fitted": f"{len(arm.fitted)}/{len(arm.fits)}",
        "levelled off": "no: A, C_mid means only" if arm.not_levelled else "yes",
        "R0": seed_interval(np.array([t.curve.r0 for t in arm.fits])),
        "A": arm.estimate("a"),
        "SD of A": arm.estimate("a").std,
        "B": arm.estimate("b"),
        "C_mid": arm.estimate("c_mid"),
        "power-law A": float(np.mean([p.a for p in power])) if power else None,
        "power-law A at 1": f"{sum(p.at_bound for p in power)}/{len(power)}",
        "window ΔA": seed_interval(np.array([t.spread for t in arm.fits])).value,
        **_forecast_cells(arm),
    }
    if spec.target is not None:
        row[f"compute to {spec.target:g}"] = _target_cell(arm)
    row["no fit"] = _reasons(arm) or "–"
    return row


def curves_table(arms: list[ArmCurves], spec: CurveSpec) -> Table:
    caption = (
        f"Compute–performance curves on {spec.axis.replace('_', ' ')} (ScaleRL Eq. 1: R(C) = R0 "
        "+ (A − R0) / (1 + (C_mid / C)^B), R0 = the eval before training; grid over A and "
        f"C_mid, B by least squares; evals after a warm-up of {spec.warmup:,.0f}), per seed. A: "
        "mean over the fitted seeds [95% t interval]; levelled off: no when a seed's A sits at "
        "its bound 1 or within one standard error of it, where A and C_mid are not identified "
        "(simulated coverage 0.85-0.87 at 5 seeds) and only their means are shown; SD of A: its"
        " spread over seeds (the noise a difference in A must exceed); B, C_mid and the compute"
        " to the target: geometric mean [95% t interval of the mean log]. Power-law A: R = A − "
        "D·C^(−B) on the same points (mean over seeds; at 1 = no asymptote found). Window ΔA: "
        "mean over seeds of the largest change of A when the warm-up is halved or doubled or "
        "the last quarter of the compute dropped. Forecast: fitted on the first half of the "
        "compute, RMSE on the second half [95% t interval]; departs = seeds whose second half "
        "departs from the forecast beyond noise and fit uncertainty (predictive F-test, p < "
        "0.05). No fit: the reason, never a number from a degenerate fit."
    )
    return Table(caption, [_row(a, spec) for a in arms])


def _verdict(c: CurveContrast) -> str:
    """A first; B (with a shared A) when A does not differ, including when A cannot be tested:
    a curve that has not levelled off has no A of its own, but a shared A still compares B."""
    if c.a_differs:
        return f"A {'higher' if c.delta_a.diff.value > 0 else 'lower'} than {c.reference}"
    if not c.levelled:
        first = "A not tested: the curves have not levelled off"
    elif c.delta_a.n < inference.MIN_SEEDS:
        first = f"A not testable: too few seeds with fits of both ({c.delta_a.n})"
    else:
        first = "A within the noise"
    if c.b_ratio is None or not math.isfinite(c.p_b):
        return f"{first}; B not comparable (too few shared-A fits)"
    if c.p_b < inference.ALPHA:
        return f"{first}; B {'higher' if c.b_ratio.value > 1 else 'lower'} (shared A)"
    return f"{first}; B within the noise (shared A): no difference found"


def contrast_table(rows: list[CurveContrast]) -> Table:
    out = [
        {
            "arm": c.arm,
            "vs": c.reference,
            "seeds A": c.delta_a.n,
            "ΔA": c.delta_a.diff,
            "p (Holm) A": c.p_a,
            "seeds B": c.b_ratio.n if c.b_ratio is not None else None,
            "B ratio (shared A)": c.b_ratio,
            "p (Holm) B": c.p_b if c.b_ratio is not None else None,
            "verdict": _verdict(c),
            "compute to target, ratio": c.target_ratio,
            "p (Holm) target": c.p_target,
        }
        for c in rows
    ]
    caption = (
        "The comparison rule (ScaleRL App. A.5, with seeds): ΔA = arm − reference paired by seed "
        "[95% t interval], paired t, Holm over the arms (seeds A: seeds where both curves have "
        "a fit of their own); when A does not differ significantly (within the measured seed "
        "noise, or not testable because the curves have not levelled off), each seed's two "
        "curves are refitted with one shared A and B compared: ratio arm / reference, "
        "geometric mean [95% t interval of the mean log ratio], paired t on the log ratios, "
        "Holm over the arms compared on B (seeds B: seeds where both shared-A fits hold). "
        "Compute to target, ratio: the arm's compute to the target pass@1 over the reference's, "
        "paired by seed where both reached it, geometric mean [95% t interval of the mean log "
        "ratio], paired t on the log ratios, Holm over the arms (the verdict is A's and B's)."
    )
    return Table(caption, out)


def _f(e: inference.Estimate, digits: int = 3) -> str:
    if not math.isfinite(e.low):
        return f"{e.value:.{digits}g} (n={e.n})"
    return f"{e.value:.{digits}g} [{e.low:.{digits}g}, {e.high:.{digits}g}]"


def sentences(arms: list[ArmCurves], rows: list[CurveContrast]) -> list[str]:
    out = []
    for arm in arms:
        if arm.fitted:
            unlevelled = (
                "; not levelled off: A and C_mid are not identified, means without intervals"
                if arm.not_levelled
                else ""
            )
            out.append(
                f"{arm.arm}: A = {_f(arm.estimate('a'))}, B = {_f(arm.estimate('b'))}, C_mid = "
                f"{_f(arm.estimate('c_mid'))} ({len(arm.fitted)}/{len(arm.fits)} seeds fitted"
                f"{unlevelled})."
            )
        else:
            out.append(f"{arm.arm}: no seed's curve gives a fit ({_reasons(arm)}).")
    for c in rows:
        delta = f", ΔA = {_f(c.delta_a.diff)}" if c.levelled else ""
        out.append(f"{c.arm} vs {c.reference}: {_verdict(c)}{delta}{_target_words(c)}.")
    return out


def _target_words(c: CurveContrast) -> str:
    t = c.target_ratio
    if t is None or not math.isfinite(t.value):
        return ""
    p = f", Holm p = {c.p_target:.3g}" if math.isfinite(c.p_target) else ""
    return f"; compute to the target: {_f(t)}× the reference's ({t.n} seeds{p})"


@per_study
def curve_analysis(data: StudyData) -> tuple[list[ArmCurves], list[CurveContrast]]:
    """Every arm's fits and the comparison rule's rows (the study must declare its curves)."""
    arms = arm_curves(data, data.curves)
    return arms, contrasts(arms, data.reference_arm, data.curves)


def has_curves(data: StudyData) -> bool:
    return data.curves is not None


def curve_sentences(data: StudyData) -> list[str]:
    """The findings' sentences on the study's curves ([] without a CurveSpec)."""
    return sentences(*curve_analysis(data)) if has_curves(data) else []


def _arms_table(data: StudyData) -> Table:
    return curves_table(curve_analysis(data)[0], data.curves)


def _contrasts_table(data: StudyData) -> Table:
    return contrast_table(curve_analysis(data)[1])


#: After the headline (the curves are a headline too), before the contrasts at equal tokens.
TABLES = (
    TableSpec(name="compute_curves", build=_arms_table, order=30, applies=has_curves),
    TableSpec(name="compute_curve_contrasts", build=_contrasts_table, order=35, applies=has_curves),
)


def draw(data: StudyData, ax) -> bool:
    """pass@1 against compute (log x) per arm: each seed's evals (dots), the mean over seeds at
    each compute mark with its 95% t band, and the sigmoid at the seeds' mean A, geometric-mean
    B and C_mid (solid over the fitted compute, dotted beyond it, to 4× the compute)."""
    spec = data.curves
    if spec is None:
        return False
    curves = trial_curves(data, spec)
    drew = False
    for arm in dict.fromkeys(c.arm for c in curves):
        mine = [c for c in curves if c.arm == arm]
        color = ax.plot([], [])[0].get_color()
        for c in mine:
            ax.plot(c.c, c.r, ".", color=color, alpha=0.35, ms=3)
        _band(ax, mine, color)
        _fitted(ax, mine, spec, color, arm)
        drew = True
    ax.set(xscale="log", xlabel=spec.axis.replace("_", " "), ylabel="eval pass@1")
    ax.set_title("pass@1 vs compute: seeds (dots), mean ± 95% band, fitted sigmoid")
    if spec.warmup > 0 and drew:
        ax.axvline(spec.warmup, color="grey", lw=0.6, ls=":")
    return drew


def _band(ax, curves, color) -> None:
    """Mean and 95% t band over seeds at the compute marks every seed has an eval for."""
    marks = [dict(zip(c.marks, zip(c.c, c.r, strict=True), strict=True)) for c in curves]
    shared = sorted(set.intersection(*(set(k for k in mk if np.isfinite(k)) for mk in marks)))
    if len(curves) < inference.MIN_SEEDS or len(shared) < 2:
        return
    x = [float(np.mean([mk[k][0] for mk in marks])) for k in shared]
    est = [inference.t_interval([mk[k][1] for mk in marks]) for k in shared]
    ax.plot(x, [e.value for e in est], "-", color=color, lw=0.8, alpha=0.7)
    low, high = (np.clip([getattr(e, b) for e in est], 0, 1) for b in ("low", "high"))
    ax.fill_between(x, low, high, color=color, alpha=0.18)


def _fitted(ax, curves, spec: CurveSpec, color, arm: str) -> None:
    """The sigmoid at the seeds' parameters; for an arm that has not levelled off
    (`check.at_ceiling`) only over the observed compute, with no asymptote drawn."""
    windows = [window(c, spec.warmup) for c in curves]
    all_fits = [fit_sigmoid(*w, c.r0) for w, c in zip(windows, curves, strict=True)]
    ceiling = any(at_ceiling(f, w[0]) for f, w in zip(all_fits, windows, strict=True))
    fits = [f for f in all_fits if f.ok]
    if not fits:
        ax.plot([], [], color=color, label=f"{arm}: no fit")
        return
    a = float(np.mean([f.a for f in fits]))
    b, cm = (float(np.exp(np.mean(np.log([getattr(f, k) for f in fits])))) for k in ("b", "c_mid"))
    r0 = float(np.mean([f.r0 for f in fits]))
    top = max(float(c.c.max()) for c in curves)
    low = max(min(float(c.c.min()) for c in curves), spec.warmup or 0.0)
    inside, beyond = np.geomspace(low, top, 100), np.geomspace(top, 4 * top, 40)
    shown = f"A≈{a:.2f} not levelled off" if ceiling else f"A={a:.3f}"
    label = f"{arm}: {shown} B={b:.2f} C_mid={cm:,.0f} ({len(fits)}/{len(curves)} fitted)"
    ax.plot(inside, sigmoid(inside, a, b, cm, r0), "-", color=color, lw=1.6, label=label)
    if not ceiling:  # an asymptote the data do not identify is not drawn, nor extrapolated to
        ax.plot(beyond, sigmoid(beyond, a, b, cm, r0), ":", color=color, lw=1.2)
        ax.axhline(a, color=color, lw=0.5, ls="--", alpha=0.6)
