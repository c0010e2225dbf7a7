"""The report's statistics: small pure functions over one data contract.

Scores are `numpy` arrays of shape `[runs, tasks]` (runs = seeds; tasks = eval sets or cells);
a 1-D array is read as `[runs, 1]`. Definitions follow rliable (Agarwal et al. 2021):
- IQM = `scipy.stats.trim_mean(x, 0.25)` over all runs × tasks pooled;
- the stratified bootstrap resamples runs with replacement within each task;
- probability of improvement = Mann-Whitney U / (n_x n_y) per task, averaged over tasks.
Variability (std over runs) is reported apart from uncertainty (CI of the aggregate), and every
estimate carries its N.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

REPS = 2000  # bootstrap resamples (rliable recommends >= 2000)
CONFIDENCE = 0.95
EXACT_PERMUTATION_MAX_N = 16  # 2^16 sign patterns; above, a seeded Monte Carlo sample


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


@dataclass(frozen=True)
class Comparison:
    """A paired contrast (arm minus reference) over matched seeds."""

    diff: Estimate
    p_value: float
    test: str


def as_matrix(scores: np.ndarray | Sequence[float]) -> np.ndarray:
    x = np.asarray(scores, dtype=float)
    return x[:, None] if x.ndim == 1 else x


def mean_score(scores: np.ndarray) -> float:
    """Mean over tasks of the per-task mean over runs."""
    return float(np.mean(np.mean(as_matrix(scores), axis=0)))


def iqm(scores: np.ndarray) -> float:
    """Interquartile mean of all runs × tasks pooled."""
    return float(sps.trim_mean(as_matrix(scores), 0.25, axis=None))


def run_std(scores: np.ndarray) -> float:
    """Std over runs (ddof=1) of each run's mean over tasks: the spread between seeds."""
    per_run = np.mean(as_matrix(scores), axis=1)
    return float(np.std(per_run, ddof=1)) if len(per_run) > 1 else float("nan")


def stratified_resamples(scores: np.ndarray, reps: int, rng: np.random.Generator) -> np.ndarray:
    """[reps, runs, tasks]: runs drawn with replacement independently within each task."""
    x = as_matrix(scores)
    runs, tasks = x.shape
    idx = rng.integers(0, runs, size=(reps, runs, tasks))
    return x[idx, np.arange(tasks)]


def _batched(stat: str) -> Callable[[np.ndarray], np.ndarray]:
    """A statistic over the last two axes of [reps, runs, tasks]."""
    if stat == "mean":
        return lambda b: b.mean(axis=1).mean(axis=1)
    if stat == "iqm":
        return lambda b: sps.trim_mean(b.reshape(len(b), -1), 0.25, axis=1)
    raise ValueError(f"stat must be 'mean' or 'iqm', got {stat!r}")


def percentile_interval(samples: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(samples, [tail, 100 - tail])
    return float(low), float(high)


def interval_estimate(
    scores: np.ndarray, stat: str = "mean", *, reps: int = REPS, seed: int = 0
) -> Estimate:
    """Mean or IQM with a 95% stratified-bootstrap percentile CI. One run gives no CI."""
    x = as_matrix(scores)
    x = x[~np.isnan(x).any(axis=1)]
    if x.size == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0)
    point = mean_score(x) if stat == "mean" else iqm(x)
    if len(x) < 2:
        return Estimate(point, float("nan"), float("nan"), len(x))
    boot = _batched(stat)(stratified_resamples(x, reps, np.random.default_rng(seed)))
    low, high = percentile_interval(boot)
    return Estimate(point, low, high, len(x), run_std(x))


def sign_flip_p_value(diffs: np.ndarray, *, seed: int = 0, reps: int = 20000) -> float:
    """Two-sided permutation p-value of mean(diffs) = 0 under random sign flips: exact (all
    2^n patterns) for n <= 16, else a seeded Monte Carlo sample (with the observed pattern)."""
    d = np.asarray(diffs, dtype=float)
    if len(d) == 0:
        return float("nan")  # no pairs: no test
    if np.allclose(d, 0):
        return 1.0
    if len(d) <= EXACT_PERMUTATION_MAX_N:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=len(d))))
    else:
        signs = np.random.default_rng(seed).choice((1.0, -1.0), size=(reps, len(d)))
        signs = np.vstack([np.ones(len(d)), signs])
    null = np.abs((signs * d).mean(axis=1))
    return float(np.mean(null >= abs(d.mean()) - 1e-12))


def paired_comparison(
    arm: np.ndarray, reference: np.ndarray, *, reps: int = REPS, seed: int = 0
) -> Comparison:
    """arm − reference over matched seeds (same index = same seed; NaN pairs dropped): mean
    difference, bootstrap CI over seeds, exact sign-flip permutation p-value."""
    a, r = np.asarray(arm, dtype=float), np.asarray(reference, dtype=float)
    keep = ~(np.isnan(a) | np.isnan(r))
    d = a[keep] - r[keep]
    return Comparison(interval_estimate(d, reps=reps, seed=seed), sign_flip_p_value(d), "sign-flip")


def per_problem_test(arm: np.ndarray, reference: np.ndarray) -> Comparison:
    """Paired per-problem test (Wilcoxon signed-rank) on per-problem accuracies of the same eval
    problems; the CI is a bootstrap over problems. Zero differences are dropped (Wilcoxon)."""
    a, r = np.asarray(arm, dtype=float), np.asarray(reference, dtype=float)
    d = a - r
    diff = interval_estimate(d)
    if len(d) == 0 or np.allclose(d, 0):
        return Comparison(diff, 1.0, "wilcoxon")
    return Comparison(diff, float(sps.wilcoxon(a, r, zero_method="wilcox").pvalue), "wilcoxon")


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, capped at 1); NaN stays NaN and
    does not count as a test."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    valid = np.flatnonzero(~np.isnan(p))
    m = len(valid)
    order = valid[np.argsort(p[valid], kind="stable")]
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, (m - rank) * p[i])
        out[i] = min(1.0, running)
    return out


def probability_of_improvement(x: np.ndarray, y: np.ndarray) -> float:
    """P(X > Y) (ties count 1/2) per task, averaged over tasks; x and y are [runs, tasks]."""
    x, y = as_matrix(x), as_matrix(y)
    per_task = []
    for t in range(x.shape[1]):
        xs, ys = x[:, t][~np.isnan(x[:, t])], y[:, t][~np.isnan(y[:, t])]
        if len(xs) == 0 or len(ys) == 0:
            continue
        u = sps.mannwhitneyu(xs, ys, alternative="greater").statistic
        per_task.append(u / (len(xs) * len(ys)))
    return float(np.mean(per_task)) if per_task else float("nan")


def rank_correlation(x: np.ndarray, y: np.ndarray, *, reps: int = REPS, seed: int = 0) -> Estimate:
    """Spearman's rho with a bootstrap CI over (x, y) pairs; NaN when x or y is constant."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    n = len(x)
    if n < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), n)
    rho = float(sps.spearmanr(x, y).statistic)
    rng = np.random.default_rng(seed)
    boot = []
    for _ in range(reps):
        i = rng.integers(0, n, n)
        if np.ptp(x[i]) > 0 and np.ptp(y[i]) > 0:
            boot.append(sps.spearmanr(x[i], y[i]).statistic)
    low, high = percentile_interval(np.asarray(boot)) if boot else (float("nan"), float("nan"))
    return Estimate(rho, low, high, n)
