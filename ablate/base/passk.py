"""pass@k and friends from (n samples, c correct) per problem, with bootstrap CIs over problems
(the estimators; the base-model × template sweep that measures them is `ablate.trial.passk_sweep`).

- pass@k  = 1 − C(n−c, k)/C(n, k)  (Chen et al. 2021), in the stable product form
            1 − ∏_{i=n−c+1}^{n} (1 − k/i);
- pass^k  = C(c, k)/C(n, k)  (all k correct) = ∏_{i=0}^{k−1} (c − i)/(n − i);
- signal  = pass@G − pass^G: the probability that a group of G samples holds both a correct and
            an incorrect answer, i.e. that GRPO's group advantage is non-zero.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ablate.base.errors import ConfigError


def _checked_counts(n, c, k: int) -> tuple[np.ndarray, np.ndarray]:
    """n, c as int64 arrays of one shape; ConfigError for k > n, c outside [0, n], k < 1."""
    n_arr, c_arr = np.broadcast_arrays(np.asarray(n), np.asarray(c))
    whole = np.all(n_arr == np.round(n_arr)) and np.all(c_arr == np.round(c_arr))
    if not whole:
        raise ConfigError("sample counts n and correct counts c must be integers")
    n_arr, c_arr = n_arr.astype(np.int64), c_arr.astype(np.int64)
    if int(k) != k or k < 1:
        raise ConfigError(f"k must be an integer >= 1, got {k!r}")
    if np.any(c_arr < 0) or np.any(c_arr > n_arr):
        raise ConfigError("correct counts c must lie in [0, n] for every problem")
    if np.any(n_arr < k):
        raise ConfigError(
            f"pass@{k} needs at least k={k} samples per problem, but some problem has only "
            f"n={int(n_arr.min())}: raise n or drop k"
        )
    return n_arr, c_arr


def pass_at_k(n, c, k: int) -> np.ndarray:
    """Unbiased pass@k per problem (float64 array shaped like n, c)."""
    n_arr, c_arr = _checked_counts(n, c, k)
    if n_arr.size == 0:
        return np.zeros(n_arr.shape)
    # i runs over n−c+1 … n; masked terms are 1. Where n − c < k the estimate is exactly 1
    # (every k-subset holds a correct sample) and a factor (1 − k/i) would be ≤ 0.
    i = np.arange(1, int(n_arr.max()) + 1, dtype=np.float64)
    flat_n, flat_c = n_arr.reshape(-1, 1), c_arr.reshape(-1, 1)
    in_range = (i > flat_n - flat_c) & (i <= flat_n)
    terms = np.where(in_range, 1.0 - k / i, 1.0)
    result = 1.0 - np.prod(terms, axis=1)
    result[(flat_n - flat_c).ravel() < k] = 1.0
    return result.reshape(n_arr.shape)


def pass_hat_k(n, c, k: int) -> np.ndarray:
    """Unbiased pass^k per problem: the probability that k samples are all correct."""
    n_arr, c_arr = _checked_counts(n, c, k)
    i = np.arange(int(k), dtype=np.float64)
    flat_n, flat_c = n_arr.reshape(-1, 1), c_arr.reshape(-1, 1)
    terms = np.maximum(flat_c - i, 0.0) / (flat_n - i)
    return np.prod(terms, axis=1).reshape(n_arr.shape)


def signal_probability(n, c, group_size: int) -> np.ndarray:
    """Per problem: P(a group of `group_size` samples is neither all wrong nor all right)."""
    return pass_at_k(n, c, group_size) - pass_hat_k(n, c, group_size)


def pass_at_k_per_problem(correct, k: int) -> np.ndarray:
    """pass@k of each problem from a [problems, n] correctness matrix."""
    correct = np.asarray(correct, dtype=bool)
    return pass_at_k(np.full(correct.shape[0], correct.shape[1]), correct.sum(axis=1), k)


def mean_pass_at_k(correct, k: int) -> float:
    """pass@k averaged over problems, from a [problems, n] correctness matrix (NaN if empty)."""
    return _mean(pass_at_k_per_problem(correct, k))


def bootstrap_ci(
    values, *, reps: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of `values` (one per problem), resampling problems."""
    data = np.asarray(values, dtype=np.float64).ravel()
    if data.size == 0:
        return float("nan"), float("nan")
    if not 0 < level < 1:
        raise ConfigError(f"confidence level must be in (0, 1), got {level!r}")
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(int(reps), data.size))].mean(axis=1)
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)


def passk_rows(
    correct: np.ndarray, ks: Sequence[int], *, reps: int = 2000, seed: int = 0
) -> list[dict[str, float]]:
    """One row per k from a [problems, n] correctness matrix: the mean of each estimator over
    problems, and a bootstrap CI of pass@k."""
    correct = np.asarray(correct, dtype=bool)
    n = np.full(correct.shape[0], correct.shape[1])
    c = correct.sum(axis=1)
    rows = []
    for k in ks:
        per_problem = pass_at_k_per_problem(correct, k)
        low, high = bootstrap_ci(per_problem, reps=reps, seed=seed)
        rows.append(
            {
                "k": int(k),
                "pass_at_k": _mean(per_problem),
                "ci_low": low,
                "ci_high": high,
                "pass_hat_k": _mean(pass_hat_k(n, c, k)),
                "signal_fraction": _mean(signal_probability(n, c, k)),
            }
        )
    return rows


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if values.size else float("nan")
