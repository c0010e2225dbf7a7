"""What a sigmoid fit is worth: its parameters' standard errors, the power law beside it, how
much A moves with the fit window, whether the first half of the compute forecasts the second,
and a fit of several curves that share one A (ScaleRL App. A.5's comparison of B).

Pure functions of (compute, pass@1) points; the fit itself is `fit.fit_sigmoid`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from ablate.report.curves.fit import (
    ALPHA,
    B_RANGE,
    NOT_LEVELLED,
    Fit,
    GridFit,
    a_grid,
    fit_sigmoid,
    grid_fit,
    no_fit,
    refine,
)


def jacobian(c: np.ndarray, fit: Fit) -> np.ndarray:
    """∂R/∂(A, B, ln C_mid) at compute `c` [points, 3]: with s = 1 / (1 + q), q = (C_mid/C)^B,
    ∂R/∂A = s, ∂R/∂B = −(A − R0)·s²·q·ln(C_mid/C), ∂R/∂ln C_mid = −(A − R0)·s²·q·B."""
    c = np.asarray(c, dtype=float)
    log_ratio = np.log(fit.c_mid / c)
    q = np.exp(np.clip(fit.b * log_ratio, -700, 700))
    s = 1.0 / (1.0 + q)
    common = -(fit.a - fit.r0) * s * s * q
    return np.stack([s, common * log_ratio, common * fit.b], axis=1)


def standard_errors(c: np.ndarray, fit: Fit, sigma: float) -> np.ndarray:
    """Asymptotic SEs of (A, B, ln C_mid) for pass@1 noise SD `sigma` at the points `c`:
    the square roots of the diagonal of σ²(JᵀJ)⁻¹ (least squares, linearised at the fit)."""
    j = jacobian(c, fit)
    return sigma * np.sqrt(np.diag(np.linalg.pinv(j.T @ j)))


def at_ceiling(fit: Fit, c: np.ndarray) -> bool:
    """Whether a curve leaves A unidentified against the ceiling 1: refused with A at its
    bound, or its A within one linearised standard error of 1 (σ from the fit's residuals at
    the points `c` it was fitted on). Chosen by simulation (`python -m devtools
    curve-calibration`): at the curves studies/compute_curves.py measured it flags 97-100% of
    studies, whose A and C_mid intervals would cover 0.85-0.87 at 5 seeds; where A is well below
    1 the intervals it leaves cover 0.91-0.97."""
    if NOT_LEVELLED in fit.reason:
        return True
    if not fit.ok or fit.n <= 3:
        return False
    se_a = standard_errors(c, fit, float(np.sqrt(fit.ssr / (fit.n - 3))))[0]
    return bool(fit.a + se_a >= 1.0)


@dataclass(frozen=True)
class PowerFit:
    """R(C) = A − D·(C / C_first)^(−B), the power law ScaleRL App. A.4 contrasts with Eq. 1."""

    a: float = float("nan")
    b: float = float("nan")
    d: float = float("nan")
    reason: str = ""

    @property
    def at_bound(self) -> bool:
        """A on the grid's upper bound 1: the law has not found an asymptote."""
        return bool(self.a >= 1.0 - 1e-9)


def fit_power_law(c: np.ndarray, r: np.ndarray, b_points: int = 200) -> PowerFit:
    """Grid over A (multiples of 0.005 in (min r, 1]) and B (log-spaced in [0.01, 5]), D ≥ 0
    by least squares for each; the lowest residual wins."""
    c, r = np.asarray(c, dtype=float), np.asarray(r, dtype=float)
    if len(c) < 4:
        return PowerFit(reason=f"no fit: {len(c)} points (needs at least 4)")
    a = a_grid(float(r.min()))[:, None]  # [A, 1]
    b = np.geomspace(0.01, 5.0, b_points)
    u = (c / c.min())[None, :] ** -b[:, None]  # [B, points]
    uu, u_sum, ur = (u * u).sum(1), u.sum(1), (u * r).sum(1)  # [B]
    uz = a * u_sum - ur  # Σ u·(A − r): [A, B]
    zz = (a * a) * len(r) - 2 * a * r.sum() + (r * r).sum()  # Σ (A − r)²: [A, 1]
    ssr = zz - np.where(uz > 0, uz * uz / uu, 0.0)
    i, k = np.unravel_index(np.argmin(ssr), ssr.shape)
    return PowerFit(float(a[i, 0]), float(b[k]), float(max(uz[i, k], 0.0) / uu[k]))


@dataclass(frozen=True)
class Forecast:
    """The first-half fit's error on the second half of the compute."""

    rmse: float = float("nan")
    p: float = float("nan")
    n_first: int = 0
    n_second: int = 0
    reason: str = ""

    @property
    def departs(self) -> bool:
        """The second half departs from the first-half fit beyond what noise and the fit's own
        uncertainty explain (predictive F-test, p < ALPHA)."""
        return bool(self.p < ALPHA)


def forecast_check(c: np.ndarray, r: np.ndarray, r0: float, split: float = 0.5) -> Forecast:
    """Fit the points at compute ≤ split × the largest, forecast the others. p is Chow's
    predictive test linearised at the first-half fit: the forecast errors e against their
    covariance σ²(I + G(JᵀJ)⁻¹Gᵀ) (J, G: the model's Jacobians at the fitted and the forecast
    points, σ² the first-half residual variance), eᵀV⁻¹e / n₂ ~ F(n₂, n₁ − 3)."""
    c, r = np.asarray(c, dtype=float), np.asarray(r, dtype=float)
    first = c <= split * c.max()
    n1, n2 = int(first.sum()), int((~first).sum())
    fit = fit_sigmoid(c[first], r[first], r0)
    if not fit.ok:
        return Forecast(n_first=n1, n_second=n2, reason=f"first half: {fit.reason}")
    errors = r[~first] - fit.predict(c[~first])
    j, g = jacobian(c[first], fit), jacobian(c[~first], fit)
    s2 = fit.ssr / (n1 - 3)
    v = np.eye(n2) + g @ np.linalg.pinv(j.T @ j) @ g.T
    stat = float(errors @ np.linalg.solve(v, errors)) / n2 / s2 if s2 > 0 else np.inf
    p = float(sps.f.sf(stat, n2, n1 - 3))
    return Forecast(float(np.sqrt(np.mean(errors**2))), p, n1, n2)


def windows(warmup: float, c_max: float, second: float) -> list[tuple[float, float]]:
    """The fit windows (start, end] the sensitivity compares: the main one (warm-up, end) first,
    then the warm-up halved and doubled, and the end cut to 3/4 of the compute (ScaleRL A.7
    varies both). Without a warm-up, the alternative start is the second point's compute."""
    starts = (warmup / 2, 2 * warmup) if warmup > 0 else (second,)
    return [(warmup, c_max), *((s, c_max) for s in starts), (warmup, 0.75 * c_max)]


def window_spread(c: np.ndarray, r: np.ndarray, r0: float, warmup: float) -> tuple[float, int]:
    """(largest |A − A_main| over the other windows that fit, windows that fit); NaN when the
    main window or every other one gives no fit."""
    c, r = np.asarray(c, dtype=float), np.asarray(r, dtype=float)
    second = float(np.sort(c)[1]) if len(c) > 1 else 0.0
    fits = [
        fit_sigmoid(c[(c > lo) & (c <= hi)], r[(c > lo) & (c <= hi)], r0)
        for lo, hi in windows(warmup, float(c.max()), second)
    ]
    ok = [f for f in fits[1:] if f.ok]
    if not fits[0].ok or not ok:
        return float("nan"), sum(f.ok for f in fits)
    return max(abs(f.a - fits[0].a) for f in ok), 1 + len(ok)


def shared_a_fits(curves: Sequence[tuple[np.ndarray, np.ndarray, float]]) -> list[Fit]:
    """Fits of several curves (compute, pass@1, R0) with one A: the grid value of A that
    minimises the summed residual, each curve's C_mid and B by least squares at it."""
    a = a_grid(max(r0 for _, _, r0 in curves))
    if not len(a):
        return [no_fit("no asymptote above every R0")] * len(curves)
    grids = [grid_fit(np.asarray(c, float), np.asarray(r, float), r0, a) for c, r, r0 in curves]
    best = int(np.argmin(sum(g.ssr.min(axis=(1, 2)) for g in grids)))
    out = []
    for (c, r, r0), g in zip(curves, grids, strict=True):
        at = GridFit(g.a[best : best + 1], g.c_mid, g.b, g.ssr[best : best + 1], g.s)
        fit = refine(np.asarray(c, float), np.asarray(r, float), r0, at)
        edge = not B_RANGE[0] * 1.01 < fit.b < B_RANGE[1] * 0.99
        out.append(no_fit("B at its edge with the shared A") if edge else fit)
    return out
