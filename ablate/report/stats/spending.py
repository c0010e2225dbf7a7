"""Lan–DeMets alpha spending and group-sequential boundaries at any information fractions.

- Spending (Lan & DeMets 1983): alpha(t) is the type-I error spent by information fraction t.
  O'Brien–Fleming-like 2 − 2Φ(z_{1−α/2}/√t) spends almost nothing early; Pocock-like
  α·ln(1 + (e − 1)t) spends evenly.
- Boundaries: z_k such that P_0(cross first at look k) = alpha(t_k) − alpha(t_{k−1}) under the
  canonical joint distribution (Z_k = S(t_k)/√t_k, S a Brownian motion), by exact recursive
  numerical integration on a grid (Armitage, McPherson & Rowe 1969): deterministic, no Monte
  Carlo. The fractions may be any increasing sequence in (0, 1], so boundaries can be recomputed
  at the fractions a study actually observed (Jennison & Turnbull 2000, ch. 7).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
from scipy import optimize, special
from scipy import stats as sps

SPENDING = ("obrien_fleming", "pocock")
_STEP = 0.01  # grid spacing of the integration, z scale
_FAR = 10.0  # |z| beyond which the null density is negligible (one-sided lower end)
_ROOT_2PI = np.sqrt(2 * np.pi)


def spent(t: np.ndarray | float, alpha: float, kind: str) -> np.ndarray:
    """Type-I error spent by information fraction t (0 at t = 0, alpha at t = 1)."""
    t = np.clip(np.asarray(t, dtype=float), 0.0, 1.0)
    if kind == "obrien_fleming":
        with np.errstate(divide="ignore"):
            return (2 * sps.norm.sf(sps.norm.isf(alpha / 2) / np.sqrt(t)))[()]
    if kind == "pocock":
        return (alpha * np.log1p((np.e - 1) * t))[()]
    raise ValueError(f"spending must be one of {SPENDING}; got {kind!r}")


def _grid(low: float, high: float) -> tuple[np.ndarray, np.ndarray]:
    """Simpson nodes and weights on [low, high] (an odd number of nodes)."""
    count = 2 * max(int(np.ceil((high - low) / (2 * _STEP))), 1) + 1
    z = np.linspace(low, high, count)
    w = np.ones(count)
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    return z, w * (z[1] - z[0]) / 3


def _exit(density, z, w, mean_scale, sd, bound, sides) -> float:
    """P(continue so far and |Z_next| >= bound (Z_next >= bound one-sided))."""
    mu = z * mean_scale  # [G]: E[Z_next | Z = z]
    tail = special.ndtr((mu - bound) / sd)
    if sides == 2:
        tail = tail + special.ndtr((-bound - mu) / sd)
    return float(np.sum(w * density * tail))


def _continue(density, z, w, mean_scale, sd, bound, sides):
    """The sub-density of Z_next on its continuation region, on a new grid."""
    high = min(bound, _FAR)
    z_next, w_next = _grid(-high if sides == 2 else -_FAR, high)
    x = (z_next[:, None] - z[None, :] * mean_scale) / sd  # [G', G]
    kernel = np.exp(-0.5 * x * x) / (sd * _ROOT_2PI)
    return kernel @ (w * density), z_next, w_next


def _solve(exit_at, target: float) -> float:
    if not target > 0:
        return float("inf")
    return float(optimize.brentq(lambda c: exit_at(c) - target, 0.0, 40.0, xtol=1e-10))


def boundaries(fractions: Sequence[float], alpha: float, kind: str, sides: int = 2) -> np.ndarray:
    """Critical |z| per look (z one-sided) so that the look-k first-crossing probability under the
    null is spent(t_k) − spent(t_{k−1}): fractions [K] increasing in (0, 1] -> z [K]."""
    key = tuple(float(f) for f in fractions)
    return np.array(_boundaries(key, float(alpha), kind, sides))


@functools.lru_cache(maxsize=4096)
def _boundaries(fractions: tuple[float, ...], alpha: float, kind: str, sides: int) -> tuple:
    """Cached: a replay asks for the same design's boundaries once per contrast and look."""
    t = np.asarray(fractions, dtype=float)
    increments = np.diff(spent(t, alpha, kind), prepend=0.0)
    return tuple(_walk(t, sides, lambda k, exit_at: _solve(exit_at, increments[k])))


def crossing_probabilities(fractions: Sequence[float], bounds: Sequence[float], sides: int = 2):
    """P_0(cross first at look k) for given boundaries: [K] (sums to the design's alpha)."""
    t, bounds = np.asarray(fractions, dtype=float), np.asarray(bounds, dtype=float)
    out: list[float] = []

    def record(k: int, exit_at) -> float:
        out.append(exit_at(bounds[k]))
        return float(bounds[k])

    _walk(t, sides, record)
    return np.array(out)


def _walk(t: np.ndarray, sides: int, choose) -> np.ndarray:
    """Look by look: `choose(k, exit_at)` picks look k's boundary given the function boundary ->
    first-crossing probability at look k; the continuation density is carried to the next look."""
    z, w, density = np.zeros(1), np.ones(1), np.ones(1)  # before look 1: Z = 0 surely
    out = []
    for k in range(len(t)):
        scale = np.sqrt(t[k - 1] / t[k]) if k else 0.0  # Z_k | Z_{k-1} = z ~ N(z·scale, sd²)
        sd = np.sqrt((t[k] - t[k - 1]) / t[k]) if k else 1.0

        def exit_at(c, d=density, z=z, w=w, s=scale, v=sd):
            return _exit(d, z, w, s, v, c, sides)

        out.append(choose(k, exit_at))
        if k + 1 < len(t):
            density, z, w = _continue(density, z, w, scale, sd, out[-1], sides)
    return np.array(out)


def nominal_levels(fractions: Sequence[float], alpha: float, kind: str) -> np.ndarray:
    """Two-sided nominal p-value thresholds per look: 2·(1 − Φ(z_k)) [K]."""
    return 2 * sps.norm.sf(boundaries(fractions, alpha, kind))


def equivalence_levels(fractions: Sequence[float], kind: str, alpha: float) -> np.ndarray:
    """One-sided nominal levels a_k per look for each one-sided test of TOST [K]: equivalence at
    look k is the (1 − 2·a_k) interval inside ±margin."""
    return sps.norm.sf(boundaries(fractions, alpha, kind, sides=1))
