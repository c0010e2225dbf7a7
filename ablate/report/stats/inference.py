"""The report's statistics: small pure functions over one data contract.

Values are `numpy` arrays over seeds (the last axis); every estimate carries its N, and
variability (the SD over seeds) is reported apart from uncertainty (the interval of the mean).
The percentile bootstrap over 2–3 seeds that the report used before covered the truth 53% (n=2)
and 72% (n=3) of the time, so it is gone.

The training seed is the unit of inference: intervals, p-values and marks come from Student-t
statistics over seeds (`t_interval`, `paired_contrast`, `welch_contrast`), Holm-adjusted over a
table's contrasts, and never from fewer than MIN_SEEDS seeds. Their cores take `[..., n]` arrays so
that `python -m devtools calibrate` checks, by simulation, the very code the report runs.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize
from scipy import stats as sps

CONFIDENCE = 0.95
ALPHA = 0.05
MIN_SEEDS = 3  # below this: a mean only, never an interval, a p-value or a mark
EXACT_PERMUTATION_MAX_N = 16  # 2^16 sign patterns; above, a seeded Monte Carlo sample
#: A spread below this fraction of the values' magnitude is float rounding (0.6 − 0.5 and
#: 0.7 − 0.6 differ in the 17th digit), not variation between seeds: no variance, no test.
ZERO_VARIANCE_RTOL = 1e-10


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its CI and the number of runs (and tasks) it rests on."""

    value: float
    low: float
    high: float
    n: int
    std: float = float("nan")  # variability over runs, not uncertainty

    def excludes(self, x: float = 0.0) -> int:
        """+1 if the CI lies above x, -1 if below, 0 if it contains x (or is undefined)."""
        if not np.isfinite(self.low) or not np.isfinite(self.high):
            return 0
        return 1 if self.low > x else -1 if self.high < x else 0


def holm(p_values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values over the last axis ([..., m] -> [..., m]): step-down,
    monotone, capped at 1; NaN stays NaN and does not count as a test."""
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p, axis=-1, kind="stable")  # NaN sort last
    ranked = np.take_along_axis(p, order, axis=-1)
    m = np.sum(~np.isnan(p), axis=-1, keepdims=True)
    scaled = (m - np.arange(p.shape[-1])) * ranked
    # fmax skips the trailing NaN so the running max is the step-down's; NaN is restored below
    adjusted = np.minimum(1.0, np.fmax.accumulate(scaled, axis=-1))
    adjusted[np.isnan(ranked)] = np.nan
    out = np.empty_like(adjusted)
    np.put_along_axis(out, order, adjusted, axis=-1)
    return out


def _nan_below_min(n: np.ndarray | int, x: np.ndarray) -> np.ndarray:
    return np.where(np.asarray(n) < MIN_SEEDS, np.nan, x)


def t_half_width(
    sd: np.ndarray | float, n: np.ndarray | int, confidence: float = CONFIDENCE
) -> np.ndarray:
    """Half-width of the Student-t interval of a mean of n values with sample SD sd (broadcast
    shapes); NaN below MIN_SEEDS, where the report gives no interval."""
    n = np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        half = sps.t.ppf((1 + confidence) / 2, n - 1) * np.asarray(sd) / np.sqrt(n)
    return _nan_below_min(n, half)[()]


def t_interval(values: np.ndarray | Sequence[float], confidence: float = CONFIDENCE) -> Estimate:
    """Mean over seeds (NaN dropped) with its Student-t interval and the sample SD (ddof=1)."""
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    n = len(x)
    if n == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0)
    mean = float(x.mean())
    sd = float(x.std(ddof=1)) if n >= 2 else float("nan")
    half = float(t_half_width(sd, n, confidence))
    return Estimate(mean, mean - half, mean + half, n, sd)


def no_variance(spread: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Whether `spread` (an SD or SE over the last axis of `values`, [...]) is zero up to float
    rounding of `values` [..., n]: ZERO_VARIANCE_RTOL of their largest magnitude."""
    scale = np.abs(np.asarray(values, dtype=float)).max(axis=-1, initial=0.0)
    return np.asarray(spread) <= ZERO_VARIANCE_RTOL * scale


def paired_t_p(diffs: np.ndarray) -> np.ndarray:
    """Two-sided paired t p-value of mean(diffs) = 0 over the last axis ([..., n] -> [...]);
    NaN below MIN_SEEDS and for constant differences: with no variance there is no t statistic,
    and a zero-variance difference is no evidence either way (identical runs under common random
    numbers, or a difference the seeds never vary), not p = 0 (nor p = 1)."""
    d = np.asarray(diffs, dtype=float)
    n = d.shape[-1]
    if n < MIN_SEEDS:
        return np.full(d.shape[:-1], np.nan)[()]
    mean, sd = d.mean(axis=-1), d.std(axis=-1, ddof=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = 2 * sps.t.sf(np.abs(mean) / (sd / np.sqrt(n)), n - 1)
    return np.where(no_variance(sd, d), np.nan, p)[()]


def sign_flip_p(diffs: np.ndarray, *, seed: int = 0, reps: int = 20000) -> np.ndarray:
    """Two-sided sign-flip p-value of mean(diffs) = 0 over the last axis ([..., n] -> [...]):
    exact over all 2^n sign patterns for n <= 16, else a seeded sample that includes the
    observed pattern; NaN below MIN_SEEDS."""
    d = np.asarray(diffs, dtype=float)
    n = d.shape[-1]
    if n < MIN_SEEDS:
        return np.full(d.shape[:-1], np.nan)[()]
    if n <= EXACT_PERMUTATION_MAX_N:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)))  # [2^n, n]
    else:
        signs = np.random.default_rng(seed).choice((1.0, -1.0), size=(reps, n))
        signs = np.vstack([np.ones(n), signs])
    rows = d.reshape(-1, n)
    tol = 1e-9 * np.abs(rows).sum(axis=1)  # the observed pattern must count as "as extreme"
    p = np.empty(len(rows))
    step = max(1, 2**22 // len(signs))  # bounds the [rows, patterns] block in memory
    for i in range(0, len(rows), step):
        block = rows[i : i + step]
        null = np.abs(block @ signs.T)  # [block, patterns]
        p[i : i + step] = np.mean(
            null >= np.abs(block.sum(axis=1))[:, None] - tol[i : i + step, None], axis=1
        )
    return p.reshape(d.shape[:-1])[()]


def welch_t(
    arm: np.ndarray, reference: np.ndarray, confidence: float = CONFIDENCE
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Welch's unequal-variance t for independent groups over the last axes ([..., n1] and
    [..., n2] -> each [...]): (mean difference, interval half-width, two-sided p, its SE).
    Half-width and p are NaN when a group has fewer than MIN_SEEDS seeds; p is NaN when both
    groups are constant (SE 0: no test, as for `paired_t_p`)."""
    a, r = np.asarray(arm, dtype=float), np.asarray(reference, dtype=float)
    diff = a.mean(axis=-1) - r.mean(axis=-1)
    n = min(a.shape[-1], r.shape[-1])
    if n < MIN_SEEDS:
        nan = np.full(np.shape(diff), np.nan)[()]
        return diff, nan, nan, nan
    va, vr = a.var(axis=-1, ddof=1) / a.shape[-1], r.var(axis=-1, ddof=1) / r.shape[-1]
    se = np.sqrt(va + vr)
    with np.errstate(invalid="ignore", divide="ignore"):
        df = (va + vr) ** 2 / (va**2 / (a.shape[-1] - 1) + vr**2 / (r.shape[-1] - 1))
        half = np.where(se == 0, 0.0, sps.t.ppf((1 + confidence) / 2, df) * se)
        p = 2 * sps.t.sf(np.abs(diff) / se, df)
    both = np.concatenate([a, r], axis=-1)  # [..., n1 + n2]
    p = np.where(no_variance(se, both), np.nan, p)
    return diff, half[()], p[()], se


@dataclass(frozen=True)
class Contrast:
    """arm − reference over seeds: the difference with its t interval and the tests on it."""

    diff: Estimate  # mean difference (arm − reference) with its t interval
    p_value: float  # two-sided paired t or Welch t; NaN below MIN_SEEDS
    p_sign_flip: float  # exact sign-flip test of the per-seed differences (paired only)
    sd: float  # SD of the per-seed differences; Welch: sqrt(n)·SE, for power analysis
    n: int  # matched seeds (paired) / the smaller group (Welch)
    test: str  # "paired t" | "Welch t"


def paired_contrast(arm: np.ndarray, reference: np.ndarray) -> Contrast:
    """arm − reference over matched seeds (same index = same seed; NaN pairs dropped)."""
    a, r = np.asarray(arm, dtype=float), np.asarray(reference, dtype=float)
    keep = ~(np.isnan(a) | np.isnan(r))
    d = a[keep] - r[keep]
    est = t_interval(d)
    return Contrast(est, float(paired_t_p(d)), float(sign_flip_p(d)), est.std, est.n, "paired t")


def welch_contrast(arm: np.ndarray, reference: np.ndarray) -> Contrast:
    """arm − reference for independent groups of seeds (NaN dropped in each)."""
    a, r = np.asarray(arm, dtype=float), np.asarray(reference, dtype=float)
    a, r = a[~np.isnan(a)], r[~np.isnan(r)]
    n = min(len(a), len(r))
    if n == 0:
        return Contrast(Estimate(np.nan, np.nan, np.nan, 0), np.nan, np.nan, np.nan, 0, "Welch t")
    diff, half, p, se = (float(v) for v in welch_t(a, r))
    sd = float(np.sqrt(n) * se)
    est = Estimate(diff, diff - half, diff + half, n, sd)
    return Contrast(est, p, float("nan"), sd, n, "Welch t")


def power_paired(
    effect: float | np.ndarray, sd: float | np.ndarray, n: int | np.ndarray, alpha: float = ALPHA
) -> float | np.ndarray:
    """Power of the two-sided paired t test at level alpha for a true mean difference `effect`
    whose per-seed differences have SD `sd` (noncentral t; broadcast shapes). NaN below
    MIN_SEEDS or for a non-positive or non-finite sd."""
    n = np.asarray(n, dtype=float)
    sd = np.asarray(sd, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        df = n - 1
        crit = sps.t.ppf(1 - alpha / 2, df)
        ncp = np.abs(effect) * np.sqrt(n) / sd
        # the lower tail as sf at -ncp: nct.cdf far in its left tail can return NaN
        power = sps.nct.sf(crit, df, ncp) + sps.nct.sf(crit, df, -ncp)
    bad = (n < MIN_SEEDS) | ~np.isfinite(sd) | (sd <= 0)
    out = np.where(bad, np.nan, power)
    return float(out) if out.ndim == 0 else out


def mde_paired(sd: float, n: int, alpha: float = ALPHA, power: float = 0.8) -> float:
    """Minimum detectable |mean difference|: the effect at which the paired t test reaches
    `power`. NaN below MIN_SEEDS or for a non-positive or non-finite sd."""
    if n < MIN_SEEDS or not np.isfinite(sd) or sd <= 0 or not alpha < power < 1:
        return float("nan")

    # solve on the standardised scale (effect / sd), where the root lies in a fixed range
    def gap(z: float) -> float:
        return power_paired(z, 1.0, n, alpha) - power

    high = 1.0
    while gap(high) < 0:
        high *= 2
    return float(sd * optimize.brentq(gap, 0.0, high, xtol=1e-12))


def seeds_needed(
    effect: float, sd: float, alpha: float = ALPHA, power: float = 0.8, max_n: int = 1000
) -> int | None:
    """Smallest n >= MIN_SEEDS whose paired t test reaches `power` for `effect`; None when the
    effect is 0, the sd unusable, or more than max_n seeds would be needed."""
    if effect == 0 or max_n < MIN_SEEDS:
        return None
    ns = np.arange(MIN_SEEDS, max_n + 1)
    reached = np.asarray(power_paired(effect, sd, ns, alpha)) >= power  # NaN compares False
    return int(ns[np.argmax(reached)]) if reached.any() else None
