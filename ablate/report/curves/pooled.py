"""One arm's sigmoid from all its seeds, its seed-jackknife intervals, and whether the data
identify its asymptote at all.

The arm's curve is fitted once to every seed's points (one A, B and C_mid; each seed keeps its
own R0): averaging the noise over seeds before the nonlinear fit is what keeps A unbiased
where single-seed fits are not (ScaleRL's grid start, then least squares on all three). The
intervals come from the seeds, never from the residuals: a trajectory's evals share their
problems, their sampling seed and the training path's wander, so its residuals are
autocorrelated and any per-curve standard error is too small. Leaving one seed out at a time
gives pseudo-values nθ − (n − 1)θ₍₋ₛ₎, one per seed, independent across seeds: their mean is the
bias-corrected estimate and their t interval the jackknife interval (Quenouille–Tukey). A
contrast pairs two arms' pseudo-values by seed.

A's interval is the jackknife's on 1 / (A − R̄0), the reciprocal of the gain (R̄0 the seeds'
mean R0), mapped back. The fitted A slides along a ridge with C_mid: where the bend is
uncertain, its sampling distribution has a long tail towards high A, and a symmetric interval
on A itself misses on that side. On simulated trajectories (`python -m devtools
curve-calibration`), A's interval on A itself covered 0.90 at twice the
study's wander (5 seeds) and 0.82 near the ceiling; on the reciprocal 0.94 and 0.87-0.90.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
from scipy import optimize

from ablate.report.curves.curvature import Curvature, curvature
from ablate.report.curves.fit import (
    A_STEP,
    B_RANGE,
    C_MID_HIGH,
    C_MID_LOW,
    Fit,
    _shapes,
    _ssr,
    a_grid,
    jacobian,
    sigmoid,
)

#: A seed's points after the warm-up: (compute, pass@1, R0).
Points = tuple[np.ndarray, np.ndarray, float]

MARGIN = 3.0  # the midpoint must lie within [MARGIN × first compute, last compute / MARGIN]
A_MAX = 1.5  # A may pass 1 in the refinement so that leave-one-out fits show A's real spread
# The grid only finds the start of the least-squares refinement of all three parameters, so it
# can be coarser than ScaleRL's (which is the estimate there): 10× fewer cells.
GRID_C_MID = 60
GRID_B = 16


def _grid(curves: list[Points]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The A, C_mid and B grids every seed's residuals share."""
    low = min(float(c.min()) for c, _, _ in curves)
    high = max(float(c.max()) for c, _, _ in curves)
    c_mid = np.geomspace(C_MID_LOW * low, C_MID_HIGH * high, GRID_C_MID)
    a = a_grid(max(r0 for _, _, r0 in curves))
    return a[1::2] if len(a) > 2 else a, c_mid, np.geomspace(*B_RANGE, GRID_B)


def _residual_grids(curves: list[Points], grid) -> list[np.ndarray]:
    a, c_mid, b = grid
    return [_ssr(a - r0, _shapes(c, c_mid, b), r - r0) for c, r, r0 in curves]  # [A, C_mid, B]


def _refine(curves: list[Points], grid, total: np.ndarray) -> np.ndarray:
    """(A, ln B, ln C_mid) by least squares from the grid's best cell."""
    a, c_mid, b = grid
    i, j, k = np.unravel_index(np.argmin(total), total.shape)
    floor = max(r0 for _, _, r0 in curves) + 1e-3
    low = np.array([floor, np.log(B_RANGE[0]), np.log(c_mid[0])])
    high = np.array([A_MAX, np.log(B_RANGE[1]), np.log(c_mid[-1])])
    start = np.clip([a[i], np.log(b[k]), np.log(c_mid[j])], low + 1e-9, high - 1e-9)

    def residuals(x: np.ndarray) -> np.ndarray:
        return np.concatenate(
            [sigmoid(c, x[0], np.exp(x[1]), np.exp(x[2]), r0) - r for c, r, r0 in curves]
        )

    def jacobian_log(x: np.ndarray) -> np.ndarray:
        """∂R/∂(A, ln B, ln C_mid): `fit.jacobian`'s B column times B."""
        b, c_mid = float(np.exp(x[1])), float(np.exp(x[2]))
        rows = [jacobian(c, Fit(a=x[0], b=b, c_mid=c_mid, r0=r0)) for c, _, r0 in curves]
        return np.concatenate(rows) * np.array([1.0, b, 1.0])

    return optimize.least_squares(residuals, start, jac=jacobian_log, bounds=(low, high)).x


@dataclass(frozen=True)
class PooledFit:
    """An arm's pooled sigmoid: `params` = (A, ln B, ln C_mid) on all seeds, `pseudo` the
    seeds' jackknife pseudo-values [seeds, 3] (NaN rows below 2 seeds) and `loo` the
    leave-one-seed-out fits they come from, why A is not identified (empty: it is), the compute
    the seeds were observed over and their mean R0."""

    seeds: tuple[int, ...] = ()
    params: np.ndarray = field(default_factory=lambda: np.full(3, np.nan))
    pseudo: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    unidentified: str = "no seed to fit"
    first: float = float("nan")
    last: float = float("nan")
    loo: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    r0: float = float("nan")
    shape_unidentified: str = "no seed to fit"  # why B and C_mid are not (empty: they are)
    bend: Curvature | None = None  # the seeds' evidence of a plateau (None: not asked for)

    @property
    def identified(self) -> bool:
        return not self.unidentified

    def predict(self, c: np.ndarray, r0: float) -> np.ndarray:
        a, log_b, log_c_mid = self.params
        return sigmoid(c, a, float(np.exp(log_b)), float(np.exp(log_c_mid)), r0)


def pooled_fit(
    by_seed: Mapping[int, Points], *, jackknife: bool = True, bend: bool = True
) -> PooledFit:
    """The arm's pooled fit, its jackknife pseudo-values (unless `jackknife` is False) and its
    identifiability: by the fit's rules and, unless `bend` is False, the seeds' evidence of a
    plateau (`curvature`; the forecast and window checks judge fits, not claims, without it)."""
    seeds = tuple(sorted(by_seed))
    curves = [by_seed[s] for s in seeds]
    if not curves:
        return PooledFit()
    first = max(float(c.min()) for c, _, _ in curves)
    last = min(float(c.max()) for c, _, _ in curves)
    grid = _grid(curves)
    if not len(grid[0]):
        return PooledFit(seeds, unidentified="R0 leaves no asymptote to fit")
    grids = _residual_grids(curves, grid)
    total = sum(grids)
    params = _refine(curves, grid, total)
    n = len(curves)
    loo = np.full((n, 3), np.nan)
    if n >= 2 and jackknife:
        for s in range(n):
            keep = [q for q in range(n) if q != s]
            loo[s] = _refine([curves[q] for q in keep], grid, total - grids[s])
    r0 = float(np.mean([r0 for _, _, r0 in curves]))
    seen = curvature([(c, r) for c, r, _ in curves], first, last) if bend else None
    fit = PooledFit(seeds, params, n * params - (n - 1) * loo, "", first, last, loo, r0, bend=seen)
    why = unidentified(fit)
    return replace(fit, unidentified=why, shape_unidentified=why or shape_unidentified(fit))


def reciprocal_gain_pseudo(fit: PooledFit) -> np.ndarray:
    """The seeds' jackknife pseudo-values of 1 / (A − R̄0) [seeds]: A exceeds every seed's R0
    (the fit's floor), so the reciprocal is finite."""
    n = len(fit.seeds)
    return n / (fit.params[0] - fit.r0) - (n - 1) / (fit.loo[:, 0] - fit.r0)


def unidentified(fit: PooledFit) -> str:
    """Why the data do not identify the arm's A (empty when they do): it needs the curve seen
    levelling off, so a fit below the ceiling with its midpoint well inside the last compute
    and a bend, and then the seeds' own curves bending (`curvature`, where `pooled_fit` asked
    for it): the fit alone bends wherever its shape does, a line in log compute included."""
    a, log_b, log_c_mid = fit.params
    c_mid = float(np.exp(log_c_mid))
    if a >= 1.0 - A_STEP:
        return f"not levelled off: the pooled fit's A ({a:.3f}) reaches the ceiling 1"
    if c_mid * MARGIN > fit.last:
        return (
            f"the midpoint is not bracketed: C_mid ≈ {c_mid:,.3g} and the compute ends at "
            f"{fit.last:,.3g}, under {MARGIN:g}× the midpoint"
        )
    if not np.log(B_RANGE[0]) + 0.01 < log_b < np.log(B_RANGE[1]) - 0.01:
        return "B at the edge of its range: the curve is a step or has not bent"
    return fit.bend.reason() if fit.bend is not None else ""


def shape_unidentified(fit: PooledFit) -> str:
    """Why B and C_mid are not identified although A is (empty when they are): a curve that
    rose before its first fitted eval and then levelled off shows its plateau, not its shape."""
    c_mid = float(np.exp(fit.params[2]))
    if c_mid < MARGIN * fit.first:
        return (
            f"the midpoint is not bracketed: C_mid ≈ {c_mid:,.3g} lies within {MARGIN:g}× of "
            f"the first fitted eval ({fit.first:,.3g})"
        )
    return ""
