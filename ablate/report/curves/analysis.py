"""Compute–performance curves of a study (its `CurveSpec`): every trial's eval pass@1 against the
compute it had spent, ScaleRL's sigmoid fitted per trial (`fit`), its checks (`check`),
then per arm the parameters over seeds with intervals, and the comparison rule against the
reference arm.

Over seeds: A gets the Student-t interval of the mean; B, C_mid and the compute to reach the
target are positive and skewed, so theirs is the t interval of the mean log, shown as the
geometric mean [exp(low), exp(high)]. Coverage is checked by simulation (`python -m devtools
curve-calibration`). Trials whose curve gives no fit are listed with the reason and left out.

The comparison rule (ScaleRL App. A.5, with seeds): A first, arm − reference paired by seed,
Holm-adjusted over the arms; when the A difference is within the measured noise (not
significant, or no larger than the A grid's step of 0.005), both curves of each seed are
refitted with one shared A and B is compared (ratio arm / reference, paired by seed, t interval
on the log, Holm over those arms).

An arm has not levelled off when any seed's curve leaves A unidentified against the ceiling
(`check.at_ceiling`): there A's and C_mid's intervals over seeds undercover (simulated at
the curves studies/compute_curves.py measured: 0.85-0.87 at 5 seeds, `python -m devtools
curve-calibration`), so the report shows their means only and skips the A test; B's intervals
hold (0.91-0.94), so B is compared with a shared A.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ablate.report.curves.check import (
    Forecast,
    PowerFit,
    at_ceiling,
    fit_power_law,
    forecast_check,
    shared_a_fits,
    window_spread,
)
from ablate.report.curves.fit import A_STEP, Fit, fit_sigmoid, fit_to_target
from ablate.report.data.load import StudyData
from ablate.report.stats import inference
from ablate.report.stats import measures as m
from ablate.spec import COMPUTE_AXES, CurveSpec

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
    curve: TrialCurve
    fit: Fit
    power: PowerFit
    spread: float  # largest |A − A_main| over the other fit windows
    forecast: Forecast
    to_target: float  # compute to reach the target pass@1 (inf: never; NaN: none/no target)
    at_ceiling: bool = False  # A not identified against the ceiling 1 (check.at_ceiling)


def window(curve: TrialCurve, warmup: float) -> tuple[np.ndarray, np.ndarray]:
    keep = curve.c > warmup
    return curve.c[keep], curve.r[keep]


def analyse(curve: TrialCurve, spec: CurveSpec) -> TrialFit:
    c, r = window(curve, spec.warmup)
    fit = fit_sigmoid(c, r, curve.r0)
    target = float("nan") if spec.target is None else fit_to_target(fit, c, spec.target)
    spread, _ = window_spread(curve.c, curve.r, curve.r0, spec.warmup)
    checks = (fit_power_law(c, r), spread, forecast_check(c, r, curve.r0))
    return TrialFit(curve, fit, *checks, target, at_ceiling(fit, c))


def seed_interval(values: np.ndarray, *, log: bool = False) -> inference.Estimate:
    """The t interval over seeds of the mean (log: of the mean log, shown back on the original
    scale, i.e. the geometric mean); NaN dropped; none below MIN_SEEDS."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if not log:
        return inference.t_interval(x)
    e = inference.t_interval(np.log(x[x > 0]))
    return inference.Estimate(*(float(np.exp(v)) for v in (e.value, e.low, e.high)), e.n, e.std)


#: The parameters whose intervals are withheld for an arm that has not levelled off.
UNIDENTIFIED = ("a", "c_mid")


@dataclass(frozen=True)
class ArmCurves:
    """One arm's fits over its seeds (the table row's numbers)."""

    arm: str
    fits: list[TrialFit]

    def values(self, name: str) -> np.ndarray:
        return np.array([getattr(t.fit, name) if t.fit.ok else np.nan for t in self.fits])

    @property
    def fitted(self) -> list[TrialFit]:
        return [t for t in self.fits if t.fit.ok]

    @property
    def not_levelled(self) -> bool:
        return any(t.at_ceiling for t in self.fits)

    def estimate(self, name: str) -> inference.Estimate:
        """A: t interval clipped to [0, 1] (A is a pass rate: clipping loses no coverage);
        B, C_mid: the log interval. A and C_mid of curves that have not levelled off: the
        mean only (low, high NaN)."""
        e = seed_interval(self.values(name), log=name != "a")
        if name in UNIDENTIFIED and self.not_levelled:
            return replace(e, low=float("nan"), high=float("nan"))
        if name != "a" or not np.isfinite(e.low):
            return e
        return replace(e, low=max(e.low, 0.0), high=min(e.high, 1.0))


def arm_curves(data: StudyData, spec: CurveSpec) -> list[ArmCurves]:
    fits = [analyse(c, spec) for c in trial_curves(data, spec)]
    arms = [a for a in dict.fromkeys(data.trials["arm"]) if a not in data.replicates]
    return [ArmCurves(a, sorted((f for f in fits if f.curve.arm == a), key=_seed)) for a in arms]


def _seed(t: TrialFit) -> int:
    return t.curve.seed


@dataclass(frozen=True)
class CurveContrast:
    """An arm against the reference: ΔA paired by seed, then (A within the noise) B's ratio
    with a shared A."""

    arm: str
    reference: str
    delta_a: inference.Contrast
    p_a: float = float("nan")  # Holm-adjusted over the arms
    b_ratio: inference.Estimate | None = None  # exp of the mean Δ ln B with a shared A
    p_b: float = float("nan")  # Holm-adjusted over the arms compared on B
    levelled: bool = True  # False: either arm has not levelled off, A is not tested
    target_ratio: inference.Estimate | None = None  # compute to the target, arm / reference
    p_target: float = float("nan")  # Holm-adjusted over the arms

    @property
    def a_differs(self) -> bool:
        """Significant after Holm and larger than the A grid's resolution (one step)."""
        return bool(self.p_a < inference.ALPHA and abs(self.delta_a.diff.value) > A_STEP + 1e-9)


def _a_of(fit: Fit) -> float:
    return fit.a if fit.ok else float("nan")


def _by_seed(arm: ArmCurves) -> dict[int, TrialFit]:
    return {_seed(t): t for t in arm.fits}


def _log_b_ratio(arm: ArmCurves, ref: ArmCurves, spec: CurveSpec) -> np.ndarray:
    """Per shared seed, ln B_arm − ln B_ref with one A fitted to both curves (NaN: no fit)."""
    mine, theirs = _by_seed(arm), _by_seed(ref)
    out = []
    for seed in sorted(set(mine) & set(theirs)):
        curves = [(*window(t.curve, spec.warmup), t.curve.r0) for t in (mine[seed], theirs[seed])]
        a, b = shared_a_fits(curves)
        out.append(np.log(a.b) - np.log(b.b) if a.ok and b.ok else np.nan)
    return np.array(out)


def contrasts(arms: list[ArmCurves], reference: str, spec: CurveSpec) -> list[CurveContrast]:
    """The comparison rule for every arm against `reference` (see the module docstring)."""
    ref = next((a for a in arms if a.arm == reference), None)
    if ref is None:
        return []
    rows = []
    for arm in (a for a in arms if a.arm != reference):
        seeds = sorted(set(_by_seed(arm)) & set(_by_seed(ref)))
        mine, theirs = (np.array([_a_of(_by_seed(x)[s].fit) for s in seeds]) for x in (arm, ref))
        levelled = not (arm.not_levelled or ref.not_levelled)
        rows.append(
            CurveContrast(
                arm.arm, reference, inference.paired_contrast(mine, theirs), levelled=levelled
            )
        )
    tested = [i for i, r in enumerate(rows) if r.levelled]
    p_a = inference.holm([rows[i].delta_a.p_value for i in tested])
    for i, p in zip(tested, p_a, strict=True):
        rows[i] = _with(rows[i], p_a=float(p))
    within = [i for i, r in enumerate(rows) if not r.a_differs]
    by_name = {a.arm: a for a in arms}
    ratios = {i: _log_b_ratio(by_name[rows[i].arm], ref, spec) for i in within}
    p_b = inference.holm(
        [float(inference.paired_t_p(ratios[i][np.isfinite(ratios[i])])) for i in within]
    )
    for i, p in zip(within, p_b, strict=True):
        rows[i] = _with(rows[i], b_ratio=seed_interval(np.exp(ratios[i]), log=True), p_b=float(p))
    return _with_target_ratios(rows, by_name, ref)


def _with_target_ratios(rows, by_name, ref: ArmCurves) -> list[CurveContrast]:
    """Each arm's compute to the target over the reference's, paired by seed (seeds where both
    reached it), Holm over the arms: the accuracy-per-token contrast."""
    logs = [_log_target_ratio(by_name[r.arm], ref) for r in rows]
    p_t = inference.holm([float(inference.paired_t_p(x)) for x in logs])
    return [
        _with(r, target_ratio=seed_interval(np.exp(x), log=True), p_target=float(p))
        for r, x, p in zip(rows, logs, p_t, strict=True)
    ]


def _log_target_ratio(arm: ArmCurves, ref: ArmCurves) -> np.ndarray:
    mine, theirs = _by_seed(arm), _by_seed(ref)
    pairs = [(mine[s].to_target, theirs[s].to_target) for s in sorted(set(mine) & set(theirs))]
    x = np.array([np.log(a / b) for a, b in pairs if 0 < a < np.inf and 0 < b < np.inf])
    return x[np.isfinite(x)]


def _with(row: CurveContrast, **changes) -> CurveContrast:
    return replace(row, **changes)
