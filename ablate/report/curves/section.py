"""The compute–performance curves in the report: the table of A, B, C_mid, the checks and the
compute to the target per arm; the comparison table; their sentences; and the figure (pass@1
against compute on a log axis, seed bands, fitted sigmoids)."""

from __future__ import annotations

import math

import numpy as np

from ablate.factors.eval_spec import CurveSpec
from ablate.report.curves.analysis import (
    ArmCurves,
    arm_curves,
    trial_curves,
)
from ablate.report.curves.compare import CurveContrast, contrasts
from ablate.report.curves.curvature import NO_PLATEAU
from ablate.report.data import numbers
from ablate.report.data.load import StudyData
from ablate.report.data.memo import per_study
from ablate.report.data.table import Table, TableSpec
from ablate.report.render.palette import study_styles
from ablate.report.stats import inference


def _reasons(arm: ArmCurves) -> str:
    return "; ".join(f"seed {t.curve.seed}: {t.fit.reason}" for t in arm.fits if not t.fit.ok)


def _target_cells(arm: ArmCurves, spec: CurveSpec) -> dict[str, object]:
    k, n = arm.reached()
    if not n:
        return {f"reached {spec.target:g}": "–", f"compute to {spec.target:g}": "–"}
    cell = arm.to_target() if k else f"not reached by {arm.budget:,.3g}"
    return {f"reached {spec.target:g}": f"{k}/{n}", f"compute to {spec.target:g}": cell}


#: How a shown A is worded everywhere (table, findings, figure): a plateau the seeds' curves
#: bend towards within the compute they were observed on, not a ceiling the method will reach.
PLATEAU = "plateau suggested within the observed compute"


def _identified_cell(arm: ArmCurves) -> str:
    p = arm.pooled
    if not p.identified:
        return f"no: {p.unidentified}"
    shape = f"; B, C_mid not: {p.shape_unidentified}" if p.shape_unidentified else ""
    return f"yes: {PLATEAU}{shape}"


def _row(arm: ArmCurves, spec: CurveSpec) -> dict[str, object]:
    if not arm.fits:
        return {"arm": arm.arm, "seeds": 0, "A identified": "no: no finished trial yet"}
    power = [t.power for t in arm.fits if t.power is not None and not t.power.reason]
    row: dict[str, object] = {
        "arm": arm.arm,
        "seeds": len(arm.fits),
        "A identified": _identified_cell(arm),
        "R0": inference.t_interval(np.array([t.curve.r0 for t in arm.fits])),
        "A": arm.estimate("a"),
        "B": arm.estimate("b"),
        "C_mid": arm.estimate("c_mid"),
        "gain per decade": arm.slope(),
    }
    if spec.target is not None:
        row.update(_target_cells(arm, spec))
    row.update(
        {
            "power-law A at 1": f"{sum(p.at_bound for p in power)}/{len(power)}",
            "window ΔA": arm.spread,
            "forecast": _forecast_cell(arm),
            "seeds refused a fit of their own": _reasons(arm) or "–",
        }
    )
    return row


def _forecast_cell(arm: ArmCurves) -> object:
    f = arm.forecast
    if f.error is None:
        return f"none: {f.reason}"
    verdict = "departs" if f.departs else "holds"
    return f"{verdict}: mean error {f.error.value:+.3f} [{f.error.low:+.3f}, {f.error.high:+.3f}]"


def curves_table(arms: list[ArmCurves], spec: CurveSpec) -> Table:
    caption = (
        f"Compute–performance curves on {spec.axis.replace('_', ' ')} (ScaleRL Eq. 1: R(C) = R0 "
        "+ (A − R0) / (1 + (C_mid / C)^B), R0 = each seed's eval before training), fitted once "
        f"per arm to every seed's evals after a warm-up of {spec.warmup:,.0f} (one A, B, C_mid; "
        "grid start, then least squares). A, B, C_mid: the jackknife-corrected estimate [95% t "
        "interval of the seeds' leave-one-out pseudo-values] (B, C_mid on the log scale, A on "
        "the reciprocal of its gain 1 / (A − mean R0): each mapped back), shown only where the "
        f"data identify A, worded '{PLATEAU}': the pooled A below the ceiling 1, its midpoint at "
        "least 3× inside the last compute, B inside its range, and the seeds' curves flattened: "
        "each seed's slope per decade (least squares on log10 compute) over the last third of "
        "the log compute below its slope over the two thirds before it (one-sided paired t over "
        "seeds, p < 0.05). Without that, the slope per decade and the compute to the target say "
        "what the curve does. B and C_mid only "
        "where the midpoint also lies 3× past the first fitted eval (else the reason). Gain per "
        "decade: the "
        "least-squares slope of pass@1 on log10 compute, mean over seeds [95% t]. Reached: "
        "seeds whose isotonic fit of pass@1 reaches the target within the compute every seed "
        "had; compute to the target: read inside the observed compute (never extrapolated), a "
        "seed that did not reach it counted at that budget (restricted geometric mean [95% t "
        "interval of the mean restricted log]: a lower bound when a seed did not). Power-law A "
        "at 1: seeds whose R = A − D·C^(−B) finds no asymptote. Window ΔA: the largest change "
        "of the pooled A when the warm-up is halved or doubled or the last quarter of the "
        "compute dropped (only where A is identified). Forecast: the arm's fit on the first "
        "half of the compute against each seed's second half, mean signed error over seeds [95%"
        " t]; departs = the interval excludes 0. Seeds refused a fit of their own: a single "
        "seed's curve that falls or shows no rise, with the reason."
    )
    rows = [_row(a, spec) for a in arms]
    columns = list(dict.fromkeys(k for r in rows for k in r))  # an arm with no trial: empty cells
    return Table(caption, [{k: r.get(k) for k in columns} for r in rows])


def _verdict(c: CurveContrast) -> str:
    if c.untested:
        return f"A and B not compared: {c.untested}"
    if c.a_differs:
        return f"A {'higher' if c.delta_a.diff.value > 0 else 'lower'} than {c.reference}"
    first = "A: no difference detected"
    if c.b_ratio is None or not math.isfinite(c.p_b):
        return f"{first}; B not comparable"
    if c.p_b < inference.ALPHA:
        return f"{first}; B {'higher' if c.b_ratio.value > 1 else 'lower'}"
    return f"{first}; B: no difference detected"


def contrast_table(rows: list[CurveContrast]) -> Table:
    out = [
        {
            "arm": c.arm,
            "vs": c.reference,
            "ΔA": c.delta_a.diff if c.delta_a is not None else None,
            "p (Holm) A": c.p_a,
            "B ratio": c.b_ratio,
            "p (Holm) B": c.p_b if c.b_ratio is not None else None,
            "verdict": _verdict(c),
            "Δ gain per decade": c.slope.diff if c.slope is not None else None,
            "p (Holm) slope": c.p_slope,
            "reached": c.reached,
            "compute to target, ratio": c.target_ratio,
            "p (Holm) target": c.p_target,
        }
        for c in rows
    ]
    caption = (
        "The comparison rule (ScaleRL App. A.5, with seeds), each arm against the reference, "
        "paired by seed, Holm over the arms for each quantity: ΔA = arm − reference (paired t on "
        "the seeds' jackknife pseudo-values [95% interval]), only where both arms identify A; "
        "when A does not differ, B's ratio (geometric, same test on ln B). Δ gain per decade "
        "(paired t on the slopes) and the compute to the target (ratio of restricted geometric "
        "means, paired t on the restricted logs: a seed that did not reach the target counts at "
        "the budget both arms had) need no asymptote and are compared for every arm. Intervals "
        "unadjusted; p adjusted; 'no difference detected' is not equivalence."
    )
    return Table(caption, out)


def _f(e: inference.Estimate) -> str:
    if not math.isfinite(e.low):
        return f"{numbers.num(e.value)} (n={e.n})"
    return numbers.estimate(e.value, e.low, e.high)


def _arm_sentence(arm: ArmCurves) -> str:
    if not arm.fits:
        return f"{arm.arm}: no finished trial yet."
    slope = f"gains {_f(arm.slope())} pass@1 per tenfold compute"
    if not arm.pooled.identified:
        return f"{arm.arm}: {slope}; A not reported ({arm.pooled.unidentified})."
    if arm.pooled.shape_unidentified:
        shape = f"B and C_mid not reported ({arm.pooled.shape_unidentified})"
    else:
        shape = f"B = {_f(arm.estimate('b'))}, C_mid = {_f(arm.estimate('c_mid'))}"
    return f"{arm.arm}: {PLATEAU}, A = {_f(arm.estimate('a'))}, {shape}; {slope}."


def sentences(arms: list[ArmCurves], rows: list[CurveContrast]) -> list[str]:
    """Only what the tables mark: a difference is named where its Holm p < 0.05."""
    out = [_arm_sentence(a) for a in arms]
    for c in rows:
        if c.slope is None:
            out.append(f"{c.arm} vs {c.reference}: not compared ({c.untested}).")
            continue
        out.append(f"{c.arm} vs {c.reference}: {_verdict(c)}{_marked(c)}.")
    return out


def _marked(c: CurveContrast) -> str:
    words = []
    if c.slope is not None and c.p_slope < inference.ALPHA:
        side = "steeper" if c.slope.diff.value > 0 else "shallower"
        words.append(
            f"slope {side} by {_f(c.slope.diff)} per decade (Holm p {numbers.p_value(c.p_slope)})"
        )
    t = c.target_ratio
    if t is not None and c.p_target < inference.ALPHA:
        side = "more" if t.value > 1 else "less"
        words.append(
            f"needs {side} compute to the target: {_f(t)}× (Holm p {numbers.p_value(c.p_target)}; "
            f"reached {c.reached})"
        )
    if words:
        return "; " + "; ".join(words)
    if c.target_ratio is None and c.reached:
        return f"; slope: no difference detected; the target was reached by neither ({c.reached})"
    return "; slope and compute to the target: no difference detected"


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


TABLES = (
    TableSpec(name="compute_curves", build=_arms_table, applies=has_curves),
    TableSpec(name="compute_curve_contrasts", build=_contrasts_table, applies=has_curves),
)


def draw(data: StudyData, ax) -> bool:
    """pass@1 against compute (log x) per arm: each seed's evals (dots), the mean over seeds at
    each compute mark with its 95% t band, and the arm's pooled sigmoid over the observed
    compute only, where its A is identified. Nothing is extrapolated."""
    spec = data.curves
    if spec is None:
        return False
    curves = trial_curves(data, spec)
    pooled = {a.arm: a for a in curve_analysis(data)[0]}
    drew, styles = False, study_styles(data)  # each arm in its colour of every figure
    for arm in dict.fromkeys(c.arm for c in curves):
        mine = [c for c in curves if c.arm == arm]
        color = styles[arm].color
        for c in mine:
            ax.plot(c.c, c.r, ".", color=color, alpha=0.35, ms=3)
        _band(ax, mine, color)
        _fitted(ax, pooled.get(arm), mine, spec, color, arm)
        drew = True
    ax.set(xscale="log", xlabel=spec.axis.replace("_", " "), ylabel="eval pass@1")
    ax.set_title("pass@1 vs compute: seeds (dots), mean ± 95% band, pooled sigmoid")
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


def _fitted(ax, arm_curve: ArmCurves | None, curves, spec: CurveSpec, color, arm: str) -> None:
    """The pooled sigmoid at the seeds' mean R0 over the compute every seed was observed on,
    where the arm's A is identified; otherwise only the legend entry says why not."""
    if arm_curve is None or not arm_curve.pooled.identified:
        why = arm_curve.pooled.unidentified if arm_curve is not None else ""
        seen = f": {NO_PLATEAU}" if why.startswith(NO_PLATEAU) else ""
        ax.plot([], [], color=color, label=f"{arm}: A not identified{seen}")
        return
    fit = arm_curve.pooled
    r0 = float(np.mean([c.r0 for c in curves]))
    inside = np.geomspace(max(fit.first, spec.warmup or fit.first), fit.last, 100)
    a, b, c_mid = (arm_curve.estimate(k).value for k in ("a", "b", "c_mid"))
    shape = f", B={b:.2f}, C_mid={c_mid:,.0f}" if np.isfinite(b) else ""
    label = f"{arm}: {PLATEAU}, A={a:.3f}{shape} ({len(curves)} seeds)"
    ax.plot(inside, fit.predict(inside, r0), "-", color=color, lw=1.6, label=label)
