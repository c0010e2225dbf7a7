"""What a curve identifies without an asymptote: the compute at which it reaches a target pass@1
(read inside the observed compute, right-censored at the budget when it never does) and its
slope on log-compute. Pure functions of one seed's points; over seeds in `analysis`.

The compute to the target is read from the curve's isotonic (non-decreasing) least-squares fit,
never from an extrapolated sigmoid: the first eval at which that fit reaches the target, the
crossing interpolated on log-compute from the eval before. The isotonic fit pools the noise
of neighbouring evals instead of taking the first noisy eval above the target, and it needs no
model: a curve that rises and falls is read as well as one that levels off. A curve whose
fit never reaches the target within its compute is censored: it reached it later or never.

Over seeds, a censored seed counts at the budget (the restricted mean: the mean of
log min(compute to target, budget), an estimand that exists whatever the censoring; with every
seed reaching the target it is the plain geometric mean). Two arms compare by the paired
difference of their restricted logs: under "no difference" the pairs are exchangeable, so the
paired t test stays valid with censored seeds in it (simulated in `devtools.calibration`).
"""

from __future__ import annotations

import numpy as np


def isotonic(y: np.ndarray) -> np.ndarray:
    """The non-decreasing least-squares fit to `y` (pool adjacent violators)."""
    blocks: list[list[float]] = []  # [sum, count]
    for v in np.asarray(y, dtype=float):
        blocks.append([v, 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            total, count = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += count
    return np.concatenate([np.full(int(n), s / n) for s, n in blocks])


def first_reach(c: np.ndarray, r: np.ndarray, target: float) -> float:
    """The compute at which the isotonic fit of pass@1 `r` over compute `c` (ascending) first
    reaches `target`, interpolated on log-compute; the first compute when the first eval
    already does; inf when no eval does (censored at the last compute)."""
    c, r = np.asarray(c, dtype=float), np.asarray(r, dtype=float)
    if not len(c):
        return float("inf")
    order = np.argsort(c)
    c, fitted = c[order], isotonic(r[order])
    above = np.nonzero(fitted >= target)[0]
    if not len(above):
        return float("inf")
    i = int(above[0])
    if i == 0:
        return float(c[0])
    low, high = fitted[i - 1], fitted[i]
    w = (target - low) / (high - low)
    return float(np.exp(np.log(c[i - 1]) + w * (np.log(c[i]) - np.log(c[i - 1]))))


def restricted_log(to_target: np.ndarray, budget: float) -> np.ndarray:
    """log min(compute to target, budget): censored seeds (inf, or beyond the budget) count
    at the budget."""
    return np.log(np.minimum(np.asarray(to_target, dtype=float), budget))


def slope_per_decade(c: np.ndarray, r: np.ndarray) -> float:
    """The least-squares slope of pass@1 on log10 compute: the gain per tenfold compute over
    the observed range (NaN below 2 distinct computes)."""
    x = np.log10(np.asarray(c, dtype=float))
    if len(np.unique(x)) < 2:
        return float("nan")
    x = x - x.mean()
    return float(x @ (np.asarray(r, dtype=float)) / (x @ x))
