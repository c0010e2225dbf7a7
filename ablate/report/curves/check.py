"""What a sigmoid fit is worth: its parameters' linearised standard errors (the recovery
tolerance of single fits in the tests), the power law beside it, how much A moves with the fit
window, and whether the first half of the compute forecasts the second (over seeds).

Pure functions of (compute, pass@1) points; the fits themselves are `fit.fit_sigmoid` (one
seed) and `pooled.pooled_fit` (an arm)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ablate.report.curves.fit import MIN_POINTS, Fit, a_grid, jacobian
from ablate.report.curves.pooled import Points, PooledFit, pooled_fit
from ablate.report.stats import inference


def standard_errors(c: np.ndarray, fit: Fit, sigma: float) -> np.ndarray:
    """Asymptotic SEs of (A, B, ln C_mid) for pass@1 noise SD `sigma` at the points `c`:
    the square roots of the diagonal of σ²(JᵀJ)⁻¹ (least squares, linearised at the fit)."""
    j = jacobian(c, fit)
    return sigma * np.sqrt(np.diag(np.linalg.pinv(j.T @ j)))


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
    """The first half's pooled fit against the second half of every seed's curve."""

    error: inference.Estimate | None = None  # mean signed forecast error over seeds [95% t]
    rmse: float = float("nan")  # root mean squared forecast error over all second-half evals
    reason: str = ""  # why there is no forecast

    @property
    def departs(self) -> bool:
        """The second half departs from the first half's forecast beyond the seeds' spread
        (the mean signed error's t test over seeds, p < ALPHA)."""
        return bool(self.error is not None and self.error.excludes(0.0) != 0)


def _errors(by_seed: Mapping[int, Points], seeds: list[int], cut: float) -> PooledFit | np.ndarray:
    """The signed errors on the evals past `cut` of the pooled fit to the evals before it, or
    that fit where it does not identify the curve."""
    first = {s: (c[c <= cut], r[c <= cut], r0) for s, (c, r, r0) in by_seed.items() if s in seeds}
    fit = pooled_fit(first, jackknife=False, bend=False)
    if not fit.identified:
        return fit
    return np.concatenate(
        [r[c > cut] - fit.predict(c[c > cut], r0) for c, r, r0 in (by_seed[s] for s in seeds)]
    )


def _mean(errors: PooledFit | np.ndarray) -> float:
    return float(np.mean(errors)) if isinstance(errors, np.ndarray) else float("nan")


def arm_forecast(by_seed: Mapping[int, Points], split: float = 0.5) -> Forecast:
    """Fit the arm's curve on the evals at compute ≤ split × the last (all seeds pooled); where
    that half identifies it by the fit's rules (`pooled.unidentified`; no bend asked of the
    seeds: this checks the fit, it claims no plateau), the mean signed error on the rest, with
    the seed jackknife's interval (a seed left out of both the fit and the error, so the fit's
    own error is in the interval). A per-curve predictive test would read autocorrelated
    residuals as independent (under AR(1) wander it "departs" 9-14% of the time on true
    sigmoids); seeds are independent."""
    seeds = sorted(by_seed)
    last = min((float(by_seed[s][0].max()) for s in seeds), default=0.0)
    cut = split * last
    if not seeds or any(int((by_seed[s][0] <= cut).sum()) < MIN_POINTS for s in seeds):
        return Forecast(reason=f"fewer than {MIN_POINTS} evals in the first half")
    if not any(int((by_seed[s][0] > cut).sum()) for s in seeds):
        return Forecast(reason="no eval in the second half")
    errors = _errors(by_seed, seeds, cut)
    if isinstance(errors, PooledFit):
        return Forecast(
            reason=f"the first half does not identify the curve ({errors.unidentified})"
        )
    n, full = len(seeds), float(np.mean(errors))
    loo = [_mean(_errors(by_seed, [q for q in seeds if q != s], cut)) for s in seeds]
    if n >= 2 and not np.all(np.isfinite(loo)):  # no interval, so no verdict either
        return Forecast(
            reason="the first half without one of the seeds does not identify the curve"
        )
    pseudo = np.array([n * full - (n - 1) * x for x in loo]) if n >= 2 else np.array([])
    rmse = float(np.sqrt(np.mean(errors**2)))
    return Forecast(inference.t_interval(pseudo), rmse)


def windows(warmup: float, c_max: float, second: float) -> list[tuple[float, float]]:
    """The fit windows (start, end] the sensitivity compares: the main one (warm-up, end) first,
    then the warm-up halved and doubled, and the end cut to 3/4 of the compute (ScaleRL A.7
    varies both). Without a warm-up, the alternative start is the second point's compute."""
    starts = (warmup / 2, 2 * warmup) if warmup > 0 else (second,)
    return [(warmup, c_max), *((s, c_max) for s in starts), (warmup, 0.75 * c_max)]


def window_spread(by_seed: Mapping[int, Points], warmup: float) -> float:
    """The largest |A − A_main| of the arm's pooled fit over the other windows that identify A
    (`by_seed`: every eval after step 0); NaN when the main window or every other one does not."""
    if not by_seed:
        return float("nan")
    last = min(float(c.max()) for c, _, _ in by_seed.values())
    second = min(float(np.sort(c)[1]) if len(c) > 1 else 0.0 for c, _, _ in by_seed.values())
    fits = []
    for lo, hi in windows(warmup, last, second):
        cut = {
            s: (c[(c > lo) & (c <= hi)], r[(c > lo) & (c <= hi)], r0)
            for s, (c, r, r0) in by_seed.items()
        }
        enough = all(len(c) >= MIN_POINTS for c, _, _ in cut.values())
        fits.append(pooled_fit(cut, jackknife=False, bend=False) if enough else None)
    main, others = fits[0], [f for f in fits[1:] if f is not None and f.identified]
    if main is None or not main.identified or not others:
        return float("nan")
    return max(abs(float(f.params[0] - main.params[0])) for f in others)
