"""The comparison rule for compute–performance curves (see `analysis`): every arm against the
reference arm, paired by seed, Holm over the arms for each quantity."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ablate.factors.eval_spec import CurveSpec
from ablate.report.curves.analysis import ArmCurves, exp_estimate, points, seed_of
from ablate.report.curves.fit import A_STEP
from ablate.report.curves.pooled import pooled_fit
from ablate.report.curves.reach import restricted_log
from ablate.report.stats import inference


@dataclass(frozen=True)
class CurveContrast:
    """An arm against the reference. A (and then B) only where both arms identify A (else
    `untested` says why); the slope and the compute to the target always."""

    arm: str
    reference: str
    untested: str = ""
    delta_a: inference.Contrast | None = None
    p_a: float = float("nan")  # Holm over the arms compared on A
    b_ratio: inference.Estimate | None = None  # exp of the mean Δ ln B (pseudo-values)
    p_b: float = float("nan")  # Holm over the arms compared on B
    slope: inference.Contrast | None = None  # Δ gain per decade of compute
    p_slope: float = float("nan")  # Holm over the arms
    target_ratio: inference.Estimate | None = None  # restricted compute to the target, ratio
    p_target: float = float("nan")  # Holm over the arms
    reached: str = ""  # "k/n vs k/n": seeds that reached the target within the budget

    @property
    def a_differs(self) -> bool:
        """Significant after Holm and larger than the A grid's resolution (one step)."""
        if self.delta_a is None:
            return False
        return bool(self.p_a < inference.ALPHA and abs(self.delta_a.diff.value) > A_STEP + 1e-9)


def _by_seed(arm: ArmCurves) -> dict:
    return {seed_of(t): t for t in arm.fits}


def _pseudo(arm: ArmCurves, seeds: list[int], spec: CurveSpec) -> np.ndarray:
    """The arm's pseudo-values over `seeds` (refitted when its own seeds differ)."""
    if list(arm.pooled.seeds) == seeds:
        return arm.pooled.pseudo
    mine = _by_seed(arm)
    return pooled_fit({s: points(mine[s].curve, spec.warmup) for s in seeds}).pseudo


def _untested(arm: ArmCurves, ref: ArmCurves, seeds: list[int]) -> str:
    for x in (arm, ref):
        if not x.pooled.identified:
            return f"{x.arm}'s A is not identified ({x.pooled.unidentified})"
    if len(seeds) < inference.MIN_SEEDS:
        return f"too few seeds in both arms ({len(seeds)})"
    return ""


def _pair(arm: ArmCurves, ref: ArmCurves, spec: CurveSpec) -> tuple[CurveContrast, tuple]:
    mine, theirs = _by_seed(arm), _by_seed(ref)
    seeds = sorted(set(mine) & set(theirs))
    if not seeds:  # an arm (or the reference) with no finished trial yet
        return CurveContrast(arm.arm, ref.arm, "no finished seed in common", reached="–"), ()
    slope = inference.paired_contrast(
        np.array([mine[s].slope for s in seeds]), np.array([theirs[s].slope for s in seeds])
    )
    row = CurveContrast(arm.arm, ref.arm, _untested(arm, ref, seeds), slope=slope)
    if spec.target is not None:
        budget = min(arm.budget, ref.budget)
        logs = [restricted_log([x[s].to_target for s in seeds], budget) for x in (mine, theirs)]
        target = inference.paired_contrast(*logs)
        k = [int((np.exp(x) < budget).sum()) for x in logs]
        row = replace(row, reached=f"{k[0]}/{len(seeds)} vs {k[1]}/{len(seeds)}")
        if any(k):  # neither arm reaching it within the budget compares nothing
            row = replace(row, target_ratio=exp_estimate(target.diff), p_target=target.p_value)
    if row.untested:
        return row, ()
    pseudo = (_pseudo(arm, seeds, spec), _pseudo(ref, seeds, spec))
    return replace(row, delta_a=inference.paired_contrast(pseudo[0][:, 0], pseudo[1][:, 0])), pseudo


def _holm(rows: list[CurveContrast], picked: list[int], p_of, field: str) -> None:
    adjusted = inference.holm([float(p_of(rows[i])) for i in picked])
    for i, p in zip(picked, adjusted, strict=True):
        rows[i] = replace(rows[i], **{field: float(p)})


def contrasts(arms: list[ArmCurves], reference: str, spec: CurveSpec) -> list[CurveContrast]:
    """The comparison rule for every arm against `reference` (see `analysis`)."""
    ref = next((a for a in arms if a.arm == reference), None)
    if ref is None:
        return []
    pairs = [_pair(a, ref, spec) for a in arms if a.arm != reference]
    rows, pseudo = [p[0] for p in pairs], [p[1] for p in pairs]
    everyone = list(range(len(rows)))
    paired = [i for i in everyone if rows[i].slope is not None]
    _holm(rows, paired, lambda r: r.slope.p_value, "p_slope")
    if spec.target is not None:
        _holm(rows, paired, lambda r: r.p_target, "p_target")
    _holm(rows, [i for i in everyone if pseudo[i]], lambda r: r.delta_a.p_value, "p_a")
    shaped = {a.arm for a in arms if not a.pooled.shape_unidentified}
    on_b = [
        i
        for i in everyone
        if pseudo[i] and not rows[i].a_differs and {rows[i].arm, reference} <= shaped
    ]
    for i in on_b:
        b = inference.paired_contrast(pseudo[i][0][:, 1], pseudo[i][1][:, 1])
        rows[i] = replace(rows[i], b_ratio=exp_estimate(b.diff), p_b=b.p_value)
    _holm(rows, on_b, lambda r: r.p_b, "p_b")
    return rows
