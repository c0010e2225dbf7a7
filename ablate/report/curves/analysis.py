"""Compute–performance curves of a study (its `CurveSpec`): every trial's eval pass@1 against the
compute it had spent; per arm ScaleRL's sigmoid fitted once to all its seeds (`pooled`) with
seed-jackknife intervals, A reported only where the data identify it, and what a curve
identifies without an asymptote (`reach`): its slope on log-compute and the compute to reach
the target, censored at the budget. Then the comparison rule against the reference arm.

The comparison rule (ScaleRL App. A.5, with seeds): A first, arm − reference paired by seed
(jackknife pseudo-values), Holm over the arms, only where both arms' A is identified; when A
does not differ (not significant, or no larger than the A grid's step of 0.005), B is compared
the same way (ratio arm / reference). The slope and the compute to the target are compared
for every arm (paired t over seeds, Holm over the arms): they need no asymptote. Every mark
and interval is calibrated on simulated trajectories (`python -m devtools curve-calibration`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ablate.factors.eval_spec import COMPUTE_AXES, CurveSpec
from ablate.report.curves.check import (
    Forecast,
    PowerFit,
    arm_forecast,
    fit_power_law,
    window_spread,
)
from ablate.report.curves.fit import Fit, fit_sigmoid
from ablate.report.curves.pooled import Points, PooledFit, pooled_fit, reciprocal_gain_pseudo
from ablate.report.curves.reach import first_reach, restricted_log, slope_per_decade
from ablate.report.data.load import StudyData
from ablate.report.stats import inference
from ablate.report.stats import measures as m

MARKS = {"generated_tokens": "eval/token_mark", "model_flops": "eval/flops_mark"}


@dataclass(frozen=True)
class TrialCurve:
    """One finished trial's evals: compute spent (> 0) and pass@1, R0 = its eval at step 0, and
    the compute mark each eval was made for (NaN where none) to line seeds up."""

    trial_id: str
    arm: str
    seed: int
    c: np.ndarray
    r: np.ndarray
    r0: float
    marks: np.ndarray


def eval_points(data: StudyData, spec: CurveSpec) -> pd.DataFrame:
    """trial_id, step, value (pass@1), compute (the axis counter after that step; 0 at step 0),
    mark (the eval's compute mark or NaN), for every finished trial."""
    h = data.history
    acc = m.curve(h, "eval/pass_at_1")
    axis = m.curve(h, COMPUTE_AXES[spec.axis]).rename(columns={"value": "compute"})
    out = acc.merge(axis, on=["trial_id", "step"], how="left")
    out.loc[out["step"] == 0, "compute"] = 0.0
    mark = MARKS.get(spec.axis)
    marks = m.curve(h, mark).rename(columns={"value": "mark"}) if mark else None
    if marks is not None and len(marks):
        out = out.merge(marks, on=["trial_id", "step"], how="left")
    else:
        out["mark"] = np.nan
    out = out[out["trial_id"].isin(data.complete()["trial_id"]) & out["compute"].notna()]
    return out.sort_values(["trial_id", "step"])


def trial_curves(data: StudyData, spec: CurveSpec) -> list[TrialCurve]:
    """Every finished trial with an eval at step 0 (its R0) and evals after it."""
    points = eval_points(data, spec)
    info = data.trials.set_index("trial_id")
    out = []
    for trial_id, p in points.groupby("trial_id", sort=False):
        start, later = p[p["step"] == 0], p[p["compute"] > 0]
        if not len(start) or not len(later):
            continue
        row = info.loc[trial_id]
        out.append(
            TrialCurve(
                str(trial_id),
                str(row["arm"]),
                int(row["seed"]),
                later["compute"].to_numpy(float),
                later["value"].to_numpy(float),
                float(start["value"].iloc[0]),
                later["mark"].to_numpy(float),
            )
        )
    return out


@dataclass(frozen=True)
class TrialFit:
    """One seed: its own sigmoid (diagnostics only: a fall, no rise), the power law, the compute
    to the target (inf: not reached within its compute; NaN: no target) and the slope."""

    curve: TrialCurve
    fit: Fit
    power: PowerFit | None
    to_target: float
    slope: float


def window(curve: TrialCurve, warmup: float) -> tuple[np.ndarray, np.ndarray]:
    keep = curve.c > warmup
    return curve.c[keep], curve.r[keep]


def points(curve: TrialCurve, warmup: float) -> Points:
    return (*window(curve, warmup), curve.r0)


def analyse(curve: TrialCurve, spec: CurveSpec, *, diagnostics: bool = True) -> TrialFit:
    c, r = window(curve, spec.warmup)
    fit = fit_sigmoid(c, r, curve.r0) if diagnostics else Fit()
    power = fit_power_law(c, r) if diagnostics else None
    target = float("nan") if spec.target is None else first_reach(c, r, spec.target)
    return TrialFit(curve, fit, power, target, slope_per_decade(c, r))


def exp_estimate(e: inference.Estimate) -> inference.Estimate:
    return inference.Estimate(*(float(np.exp(v)) for v in (e.value, e.low, e.high)), e.n, e.std)


def asymptote_estimate(fit: PooledFit) -> inference.Estimate:
    """A = R̄0 + 1 / g from the t interval of g = 1 / (A − R̄0)'s pseudo-values (`pooled`): an
    interval of g reaching 0 leaves A unbounded above, so up to the ceiling 1 (and a mean g
    at or below 0, the pooled A as the estimate)."""
    g = inference.t_interval(reciprocal_gain_pseudo(fit))
    if not g.high > 0:  # no seeds to leave out, or an interval with no positive gain in it
        return inference.Estimate(float("nan"), float("nan"), float("nan"), g.n)
    value = fit.r0 + 1.0 / g.value if g.value > 0 else float(fit.params[0])
    high = fit.r0 + 1.0 / g.low if g.low > 0 else 1.0
    low = fit.r0 + 1.0 / g.high
    return inference.Estimate(min(value, 1.0), max(low, 0.0), min(high, 1.0), g.n)


PARAMS = {"a": 0, "b": 1, "c_mid": 2}  # columns of the pooled fit's (A, ln B, ln C_mid)


@dataclass(frozen=True)
class ArmCurves:
    """One arm: its seeds, its pooled fit, and the arm-level checks."""

    arm: str
    fits: list[TrialFit]
    pooled: PooledFit
    spread: float = float("nan")  # window ΔA of the pooled fit
    forecast: Forecast = field(default_factory=lambda: Forecast(reason="not computed"))

    @property
    def budget(self) -> float:
        """The compute every seed was observed to (the censoring point)."""
        return min((float(t.curve.c.max()) for t in self.fits), default=float("nan"))

    def estimate(self, name: str) -> inference.Estimate:
        """A, B or C_mid: the jackknife-corrected pooled estimate [95% t interval of the seeds'
        pseudo-values] (B, C_mid on the log scale, A on the reciprocal of its gain: each shown
        back); A clipped to [0, 1] (a pass rate). NaN throughout where the data do not
        identify A, and for B and C_mid where they do not identify the shape."""
        # shape_unidentified repeats `unidentified` where A is not identified either
        why = self.pooled.unidentified if name == "a" else self.pooled.shape_unidentified
        if why:
            n = len(self.pooled.seeds)
            return inference.Estimate(float("nan"), float("nan"), float("nan"), n)
        if name == "a":
            return asymptote_estimate(self.pooled)
        return exp_estimate(inference.t_interval(self.pooled.pseudo[:, PARAMS[name]]))

    def slope(self) -> inference.Estimate:
        slopes = np.array([t.slope for t in self.fits])
        return inference.t_interval(slopes[np.isfinite(slopes)])

    def reached(self) -> tuple[int, int]:
        """(seeds whose curve reached the target within the budget, seeds)."""
        values = np.array([t.to_target for t in self.fits])
        return int((values <= self.budget).sum()), len(values)

    def to_target(self) -> inference.Estimate:
        """The restricted geometric mean of the compute to the target [95% t interval]."""
        values = np.array([t.to_target for t in self.fits])
        return exp_estimate(inference.t_interval(restricted_log(values, self.budget)))


def seed_of(t: TrialFit) -> int:
    return t.curve.seed


def arm_curve(arm: str, fits: list[TrialFit], spec: CurveSpec, *, checks: str = "all"):
    """An arm's pooled fit, its forecast (unless `checks` is "none") and its window
    sensitivity (`checks` "all")."""
    fits = sorted(fits, key=seed_of)
    by_seed = {seed_of(t): points(t.curve, spec.warmup) for t in fits}
    pooled = pooled_fit(by_seed)
    if checks == "none":
        return ArmCurves(arm, fits, pooled)
    full = {seed_of(t): (t.curve.c, t.curve.r, t.curve.r0) for t in fits}
    shown = checks == "all" and pooled.identified  # the window check is of an A shown
    spread = window_spread(full, spec.warmup) if shown else float("nan")
    return ArmCurves(arm, fits, pooled, spread, arm_forecast(by_seed))


def arm_curves(data: StudyData, spec: CurveSpec) -> list[ArmCurves]:
    fits = [analyse(c, spec) for c in trial_curves(data, spec)]
    arms = [a for a in dict.fromkeys(data.trials["arm"]) if a not in data.replicates]
    return [arm_curve(a, [f for f in fits if f.curve.arm == a], spec) for a in arms]
