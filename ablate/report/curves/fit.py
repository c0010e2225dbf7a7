"""ScaleRL's compute–performance sigmoid (arXiv 2510.13786, Eq. 1), fitted to one curve as its
App. A.5 does, or "no fit" with the reason. An arm's parameters come from all its seeds at once
(`pooled`); the single-curve fit is kept for the per-seed diagnostics and as the grid both use.

    R(C) = R0 + (A − R0) / (1 + (C_mid / C)^B)

R0 is the pass@1 before training (the eval at C = 0), A the asymptote, B the efficiency
exponent, C_mid the compute at which half the gain A − R0 is reached. The fit: a grid over A
(multiples of 0.005 in (R0, 1]) and C_mid (100 log-spaced values from 0.1× the first fitted
compute to 8× the last), B by
least squares for each; the lowest residual wins. For fixed (A, C_mid, B) the residual sum of
squares is a quadratic in A − R0 over per-(C_mid, B) sums, so the whole grid is one broadcast:
a coarse B grid for every cell, then B refined by a bounded scalar search at the best cells.

A fit is refused, never reported, when (in this order):
- fewer than MIN_POINTS points (3 parameters need residual degrees of freedom);
- no grid value of A lies above R0;
- the curve falls as compute grows (after a rise, or throughout): adding a falling term
  D·ln(C / C_first), D < 0, to the sigmoid improves the fit significantly (F-test, 1 and n − 4
  degrees of freedom, p < ALPHA; both fitted over the (C_mid, B) grid with A − R0 and D by
  linear least squares) and that fit ends below its peak by more than twice its residual SD
  (a fall, not a bent top);
- the curve has no rise above its noise: the F-test of the sigmoid against a flat line
  (2 and n − 3 degrees of freedom) has p ≥ ALPHA;
- the best fit lies on the edge of the C_mid or B grid: the curve has not bent within 8× the
  observed compute or is a step;
- A is at its bound 1: the curve has not levelled off within the observed compute, and any
  asymptote up to 1 fits it (the power law's failure in ScaleRL App. A.4, not an estimate).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy import optimize
from scipy import stats as sps

ALPHA = 0.05
MIN_POINTS = 5
A_STEP = 0.005  # ScaleRL App. A.5
C_MID_POINTS = 100  # ScaleRL App. A.5
C_MID_LOW = 0.1  # C_mid grid from this × the first fitted compute ...
# ... to this × the last. Beyond the observed compute: a grid that stops at the last eval forces
# the midpoint inside it and A down with it on curves seen only up to their midpoint (a third of
# them fitted, every A off by 0.05-0.41); whether the midpoint was observed is judged afterwards,
# once per arm (`pooled.unidentified`).
C_MID_HIGH = 8.0
B_RANGE = (0.1, 10.0)
B_COARSE = 48
REFINE_CELLS = 8


def sigmoid(c: np.ndarray, a: float, b: float, c_mid: float, r0: float) -> np.ndarray:
    """ScaleRL's Eq. 1 at compute `c` (R0 at c = 0)."""
    c = np.asarray(c, dtype=float)
    with np.errstate(divide="ignore", over="ignore"):
        return r0 + (a - r0) / (1.0 + (c_mid / c) ** b)


def compute_to_reach(target: float, a: float, b: float, c_mid: float, r0: float) -> float:
    """The compute at which the sigmoid reaches `target`: 0 when R0 already does, inf when the
    asymptote A does not exceed it."""
    if target <= r0:
        return 0.0
    if target >= a:
        return float("inf")
    return float(c_mid / ((a - r0) / (target - r0) - 1.0) ** (1.0 / b))


@dataclass(frozen=True)
class Fit:
    """One seed's sigmoid fit (`reason` empty) or the reason there is none: the report uses it
    only to say which seeds' curves fall or do not rise (the arm's parameters come from
    `pooled`). A refusal for A at its bound (`NOT_LEVELLED`) keeps the bound fit's parameters."""

    a: float = float("nan")
    b: float = float("nan")
    c_mid: float = float("nan")
    r0: float = float("nan")
    ssr: float = float("nan")
    n: int = 0
    reason: str = ""

    @property
    def ok(self) -> bool:
        return not self.reason

    def predict(self, c: np.ndarray) -> np.ndarray:
        return sigmoid(c, self.a, self.b, self.c_mid, self.r0)


def jacobian(c: np.ndarray, fit: Fit) -> np.ndarray:
    """∂R/∂(A, B, ln C_mid) at compute `c` [points, 3]: with s = 1 / (1 + q), q = (C_mid/C)^B,
    ∂R/∂A = s, ∂R/∂B = −(A − R0)·s²·q·ln(C_mid/C), ∂R/∂ln C_mid = −(A − R0)·s²·q·B."""
    c = np.asarray(c, dtype=float)
    log_ratio = np.log(fit.c_mid / c)
    q = np.exp(np.clip(fit.b * log_ratio, -700, 700))
    s = 1.0 / (1.0 + q)
    common = -(fit.a - fit.r0) * s * s * q
    return np.stack([s, common * log_ratio, common * fit.b], axis=1)


#: The reason of a fit refused because A sits at its bound 1.
NOT_LEVELLED = "the curve has not levelled off within the observed compute (A at 1)"


def no_fit(reason: str, n: int = 0) -> Fit:
    return Fit(n=n, reason=f"no fit: {reason}")


def a_grid(r0: float, low: float | None = None) -> np.ndarray:
    """Multiples of A_STEP in (max(r0, low), 1] (anchored at 0, so arms share grid values)."""
    floor = max(r0, low if low is not None else r0)
    first = np.floor(floor / A_STEP + 1e-9) + 1
    return np.arange(first, round(1 / A_STEP) + 1) * A_STEP


def c_mid_grid(c: np.ndarray) -> np.ndarray:
    return np.geomspace(C_MID_LOW * c.min(), C_MID_HIGH * c.max(), C_MID_POINTS)


def _shapes(c: np.ndarray, c_mid: np.ndarray, b: np.ndarray) -> np.ndarray:
    """s = 1 / (1 + (C_mid / C)^B): [C_mid, B, points]."""
    ratio = np.log(c_mid)[:, None, None] - np.log(c)[None, None, :]
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(np.clip(b[None, :, None] * ratio, -700, 700)))


def _ssr(gain: np.ndarray, s: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Σ (gain·s − y)² for gains [A] and shapes [..., points] -> [A, ...]: the quadratic in the
    gain over the sums Σs², Σs·y, Σy²."""
    s2, sy, yy = (s * s).sum(-1), (s * y).sum(-1), float((y * y).sum())
    g = gain.reshape((-1,) + (1,) * s2.ndim)
    return g * g * s2 - 2 * g * sy + yy


@dataclass(frozen=True)
class GridFit:
    """The coarse grid's residuals [A, C_mid, B] and the grid itself."""

    a: np.ndarray
    c_mid: np.ndarray
    b: np.ndarray
    ssr: np.ndarray
    s: np.ndarray  # [C_mid, B, points]


def grid_fit(c: np.ndarray, r: np.ndarray, r0: float, a: np.ndarray) -> GridFit:
    b = np.geomspace(*B_RANGE, B_COARSE)
    cm = c_mid_grid(c)
    s = _shapes(c, cm, b)
    return GridFit(a, cm, b, _ssr(a - r0, s, r - r0), s)


def refine(c: np.ndarray, r: np.ndarray, r0: float, g: GridFit) -> Fit:
    """B by bounded least squares at the REFINE_CELLS best (A, C_mid) cells; the best wins."""
    profile = g.ssr.min(axis=2)  # [A, C_mid]
    cells = np.argsort(profile, axis=None)[:REFINE_CELLS]
    best = Fit()
    for i, j in zip(*np.unravel_index(cells, profile.shape), strict=True):
        a, cm = float(g.a[i]), float(g.c_mid[j])

        def ssr(log_b: float, a: float = a, cm: float = cm) -> float:
            return float(((sigmoid(c, a, np.exp(log_b), cm, r0) - r) ** 2).sum())

        lo, hi = np.log(B_RANGE)
        found = optimize.minimize_scalar(ssr, bounds=(lo, hi), method="bounded")
        if not best.ssr <= found.fun:  # also replaces the initial NaN
            best = Fit(a, float(np.exp(found.x)), cm, r0, float(found.fun), len(c))
    return best


def _f_p(better: float, worse: float, df1: int, df2: int) -> float:
    """p of the nested-model F-test: `worse` (fewer parameters) against `better`."""
    if df2 <= 0:
        return float("nan")
    if better <= 0:
        return 0.0 if worse > 0 else 1.0
    f = max(worse - better, 0.0) / df1 / (better / df2)
    return float(sps.f.sf(f, df1, df2))


def falling_fit(c: np.ndarray, r: np.ndarray, r0: float, g: GridFit) -> tuple[float, float, float]:
    """The sigmoid with and without a falling term D·ln(C / C_first), D ≤ 0, over the (C_mid, B)
    grid with the gain A − R0 and D by linear least squares in each cell: (SSR without, SSR
    with, how far the fit with it ends below its peak over the points)."""
    x, y = np.log(c / c.min()), r - r0
    s2, sy, sx = (g.s * g.s).sum(-1), (g.s * y).sum(-1), (g.s * x).sum(-1)  # [C_mid, B]
    xx, yx, yy = float(x @ x), float(y @ x), float(y @ y)
    without = yy - sy * sy / s2
    det = s2 * xx - sx * sx
    with np.errstate(divide="ignore", invalid="ignore"):
        gain, d = (sy * xx - sx * yx) / det, (s2 * yx - sx * sy) / det
        falling = (d < 0) & (det > 1e-12 * s2 * max(xx, 1e-300))
        both = np.where(falling, yy - gain * sy - d * yx, without)
    j, k = np.unravel_index(np.argmin(both), both.shape)
    curve = gain[j, k] * g.s[j, k] + d[j, k] * x if falling[j, k] else y * 0
    return float(without.min()), float(both[j, k]), float(curve.max() - curve[np.argmax(c)])


def fit_sigmoid(c: np.ndarray, r: np.ndarray, r0: float) -> Fit:
    """ScaleRL's sigmoid through the points (c > 0, pass@1 r) with R0 = `r0`, or no fit."""
    c, r = np.asarray(c, dtype=float), np.asarray(r, dtype=float)
    n = len(c)
    if n < MIN_POINTS:
        return no_fit(f"{n} points after the warm-up (needs at least {MIN_POINTS})", n)
    a = a_grid(r0)
    if not len(a):
        return no_fit(f"R0 = {r0:.3f} leaves no asymptote to fit", n)
    g = grid_fit(c, r, r0, a)
    fit = refine(c, r, r0, g)
    rise_ssr, fall_ssr, drop = falling_fit(c, r, r0, g)
    p_fall = _f_p(fall_ssr, rise_ssr, 1, n - 4)
    if p_fall < ALPHA and drop > 2 * np.sqrt(fall_ssr / (n - 4)):
        return no_fit(f"the curve falls as compute grows (F-test of a fall: p = {p_fall:.3f})", n)
    p_rise = _f_p(fit.ssr, float(((r - r.mean()) ** 2).sum()), 2, n - 3)
    if not p_rise < ALPHA:
        return no_fit(f"no rise above the noise (F-test against a flat line: p = {p_rise:.2f})", n)
    if fit.c_mid in (g.c_mid[0], g.c_mid[-1]) or not B_RANGE[0] * 1.01 < fit.b < B_RANGE[1] * 0.99:
        edge = "C_mid" if fit.c_mid in (g.c_mid[0], g.c_mid[-1]) else "B"
        return no_fit(f"the curve has not bent within the observed compute ({edge} at its edge)", n)
    if fit.a >= a[-1] - 1e-9:
        return replace(fit, reason=f"no fit: {NOT_LEVELLED}")
    return fit
