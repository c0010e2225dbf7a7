"""Information-based monitoring for the sequential designs (`stats.sequential`): how much a
look knows about a contrast, read off the crossed seeds × problems components.

A contrast's estimate with n seeds on J problems has (`stats.crossed`)

    Var(Δ̂_n) = σ²_seed/n + σ²_problem/J + σ²_resid/(n·J) = v_seed/n + v_problem,

v_seed = MS_seed/J (a seed's own spread over the J problems, eval noise in it) and v_problem =
σ²_problem/J (the arm × problem interaction: the same problems at every seed, so more seeds never
average it out). The information is I = 1/Var, and the information fraction at look k is

    t_k = Var̂(Δ̂_K) / Var̂(Δ̂_k)   (both from look k's components, Δ̂_K projected to looks[-1]),

i.e. t_k = (1/n_K + r)/(1/n_k + r) with r = v_problem/v_seed; t_j of the earlier looks follows
from the same r. With no interaction r = 0 and t_k = n_k/n_K, the seed count; when the
interaction dominates, t_k is near 1 early: most of what the design will ever know is known.
The sequential design reads v_seed at its upper 90% confidence bound (`ratio(c, level)`): with
3–5 seeds MS_seed has 2–4 df, and one small by chance would report a look as knowing nearly
everything exactly when its standard error is too small, spending much of the alpha there (on
whole simulated studies at τ = 0.5, O'Brien–Fleming, 3,000 studies: family-wise error 0.051
with the point estimate at 256 problems, 0.044 at the bound; the fixed design's 0.038).

Seeds cannot help a contrast when all the remaining seeds would lower its standard error by
less than SEED_GAIN (1 − √t_k < 0.05, i.e. t_k > 0.9025): its look is then its final analysis,
spending all its remaining alpha, and the advice is more eval problems or samples (which shrink
v_problem and v_seed's eval noise), not more seeds. At 10% the design saved more (0.67 of the
fixed design's trials at τ = 0.5, Δ = 0.05) but lost power it did not need to (0.78 against the
fixed design's 0.86): an SE 10% larger costs that much. The fraction is read to two decimals
(DIGITS) so that boundaries, cached on it, are computed once per value.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats as sps

from ablate.report.stats.crossed import Crossed

SEED_GAIN = 0.05  # a look is final when every remaining seed would cut the SE by less than this
DIGITS = 2  # information fractions are read to two decimals


def ratio(c: Crossed, level: float | None = None) -> np.ndarray:
    """r = v_problem / v_seed of a look's components (0 without an interaction, inf without
    seed spread); NaN where the look has no variance estimate. With `level`, v_seed is read at
    its upper `level` confidence bound (n − 1 df)."""
    v_seed = np.asarray(c.ms_seed, dtype=float) / c.problems
    if level is not None and c.n > 1:
        v_seed = v_seed * (c.n - 1) / sps.chi2.ppf(level, c.n - 1)
    v_problem = np.asarray(c.problem_var, dtype=float) / c.problems
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(v_seed > 0, v_problem / v_seed, np.where(v_problem > 0, np.inf, np.nan))


def fraction(r: np.ndarray, n: int, n_max: int) -> np.ndarray:
    """t = Var(Δ̂ at n_max seeds) / Var(Δ̂ at n seeds) for r = v_problem / v_seed, read to
    DIGITS decimals; n / n_max where r is unknown (NaN)."""
    r = np.asarray(r, dtype=float)
    with np.errstate(invalid="ignore"):
        t = np.where(np.isinf(r), 1.0, (1 / n_max + r) / (1 / n + r))
    t = np.where(np.isnan(r), n / n_max, t)
    return np.round(t, DIGITS)[()]


def seed_gain(t: np.ndarray) -> np.ndarray:
    """How much all the remaining seeds would lower the standard error: 1 − √t."""
    return (1 - np.sqrt(np.asarray(t, dtype=float)))[()]


def seeds_cannot_help(t: np.ndarray) -> np.ndarray:
    return (seed_gain(t) < SEED_GAIN)[()]


def look_fractions(looks: Sequence[int], k: int, t: float, final: bool) -> tuple[float, ...]:
    """The fractions of looks 1..k given look k's t (from its r, the earlier looks at their
    planned seed counts); with `final`, rescaled so that look k is the last (t = 1)."""
    n, n_max = np.asarray(looks[: k + 1], dtype=float), float(looks[-1])
    t = min(float(t), 0.995)  # t = 1: no seed adds information; keep the fractions increasing
    r = max((t / n[-1] - 1 / n_max) / (1 - t), 0.0)
    out = (1 / n_max + r) / (1 / n + r)
    if final:
        out = out / out[-1]
    return tuple(float(x) for x in out)


def problem_share(c: Crossed, n: int) -> np.ndarray:
    """v_problem's share of Var(Δ̂) at n seeds."""
    v_seed = np.asarray(c.ms_seed, dtype=float) / c.problems
    v_problem = np.asarray(c.problem_var, dtype=float) / c.problems
    with np.errstate(invalid="ignore", divide="ignore"):
        return (v_problem / (v_seed / n + v_problem))[()]


def advice(name: str, t: float, share: float, remaining: int) -> str:
    """The one line `ablate run --until-decided` prints for a contrast seeds cannot help."""
    return (
        f"{name}: seeds cannot help: the remaining {remaining} seed(s) would lower the SE of Δ "
        f"by {100 * float(seed_gain(t)):.0f}% (< {100 * SEED_GAIN:.0f}%); the arm × problem "
        f"term σ²_problem/J is {100 * share:.0f}% of Var(Δ̂): evaluate more problems (or "
        "samples per problem) instead"
    )
