"""Simulated compute–performance trajectories, noisy the way real ones are.

A simulated seed draws its own curve around the arm's (A_s ~ N(A, a_sd²), ln B_s and ln C_mid_s
~ N(ln B / ln C_mid, log_sd²)) and is evaluated before training and at each point of a compute
schedule. On top of its sigmoid sit the two noises of a real trial:
- the training path's wander: a stationary AR(1) over the evals (SD `wander_sd`, lag-1
  correlation `wander_rho`): a run that is ahead at one eval is still ahead at the next;
- eval sampling noise, binomial over `evals` samples, of which a share `eval_shared` of the
  variance is common to every eval of the trial (the same problems and the same eval sampling
  seed at every eval, R0's included).
So a trajectory's residuals are autocorrelated, which per-curve tests read as independent.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ablate.report.curves.analysis import TrialCurve
from ablate.report.curves.fit import sigmoid
from ablate.report.curves.pooled import pooled_fit


def schedule(first: float, per_decade: int, every: float, end: float) -> np.ndarray:
    """The eval points of a log-spaced cadence from `first` plus a linear one every `every`,
    up to `end` (included): a study's `EvalSpec(log_from, log_per_decade, every_tokens)`."""
    k = np.arange(int(np.floor(per_decade * np.log10(end / first))) + 1)
    log = first * 10 ** (k / per_decade)
    linear = np.arange(every, end + every / 2, every)
    return np.unique(np.concatenate([log, linear, [end]]))


#: studies/compute_curves.py's schedule: 4 per decade from 20k, every 500k, to 6M tokens
STUDY_SCHEDULE = schedule(20_000, 4, 500_000, 6_000_000)


@dataclass(frozen=True)
class CurveModel:
    """Defaults: the scale of studies/compute_curves.py's GRPO curves. The wander's SD is that
    of the final pass@1 over seeds the study measured (0.007-0.017 for its three arms)."""

    a: float = 0.85
    b: float = 1.2
    c_mid: float = 1_500_000.0
    r0: float = 0.52
    a_sd: float = 0.015  # ScaleRL: A varied by ±0.015 over 3 runs
    log_sd: float = 0.15  # seed SD of ln B and ln C_mid
    evals: int = 1024  # eval samples per point (128 problems × 8)
    wander_sd: float = 0.015
    wander_rho: float = 0.7
    eval_shared: float = 0.5
    warmup: float = 50_000.0
    target: float = 0.7  # the study's CurveSpec.target
    points: tuple[float, ...] = tuple(STUDY_SCHEDULE)


def _draw(model: CurveModel, rng: np.random.Generator, size: int) -> np.ndarray:
    """Seeds' (A, B, C_mid) [size, 3]."""
    a = model.a + model.a_sd * rng.standard_normal(size)
    b, c_mid = np.exp(
        np.log([[model.b], [model.c_mid]]) + model.log_sd * rng.standard_normal((2, size))
    )
    return np.stack([a, b, c_mid], axis=1)


def _wander(model: CurveModel, rng: np.random.Generator, n: int) -> np.ndarray:
    w = np.empty(n)
    w[0] = model.wander_sd * rng.standard_normal()
    innovation = model.wander_sd * np.sqrt(1 - model.wander_rho**2)
    for i in range(1, n):
        w[i] = model.wander_rho * w[i - 1] + innovation * rng.standard_normal()
    return w


def simulate_seed(model: CurveModel, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """(compute, observed pass@1, observed R0, the seed's true A, B, C_mid)."""
    truth = _draw(model, rng, 1)[0]
    c = np.asarray(model.points, dtype=float)
    p = np.clip(sigmoid(c, *truth, model.r0) + _wander(model, rng, len(c)), 0.001, 0.999)
    shared = rng.standard_normal()
    own = rng.standard_normal(len(c) + 1)
    mix = np.sqrt(model.eval_shared) * shared + np.sqrt(1 - model.eval_shared) * own
    sd = np.sqrt(np.append(p, model.r0) * (1 - np.append(p, model.r0)) / model.evals)
    observed = np.clip(np.append(p, model.r0) + sd * mix, 0.0, 1.0)
    return c, observed[:-1], float(observed[-1]), truth


def seed_curve(model: CurveModel, rng: np.random.Generator, arm: str, seed: int) -> TrialCurve:
    """One simulated seed as the report reads a trial: evals at compute > 0 and R0."""
    c, r, r0, _ = simulate_seed(model, rng)
    return TrialCurve(f"{arm}{seed}", arm, seed, c, r, r0, np.full(len(c), np.nan))


def _crossing(truth: np.ndarray, model: CurveModel) -> np.ndarray:
    """Each seed's true compute to the target (inf where its A stays below it)."""
    a, b, c_mid = truth.T
    gain = (a - model.r0) / (model.target - model.r0)
    with np.errstate(invalid="ignore", divide="ignore"):
        c = c_mid / (gain - 1.0) ** (1.0 / b)
    return np.where(gain > 1, c, np.inf)


@lru_cache(maxsize=32)
def truths(model: CurveModel, draws: int = 4000) -> dict[str, float]:
    """What the report's intervals estimate, by Monte Carlo over the seed distribution: the mean
    asymptote A; B and C_mid of the sigmoid that best fits the arm's expected curve over the
    observed compute (the pooled fit's estimand), the mean slope per decade, and the restricted
    geometric mean of the compute to the target at the budget."""
    rng = np.random.default_rng(12345)
    seeds = _draw(model, rng, draws)
    c = np.asarray(model.points, dtype=float)
    c = c[c > model.warmup]
    curves = sigmoid(c[None, :], seeds[:, :1], seeds[:, 1:2], seeds[:, 2:], model.r0)
    fit = pooled_fit({0: (c, curves.mean(axis=0), model.r0)}, jackknife=False)
    x = np.log10(c) - np.log10(c).mean()
    budget = float(c.max())
    return {
        "a": model.a,  # A claims the asymptote: the seeds' mean A, whatever the fit window
        "b": float(np.exp(fit.params[1])),
        "c_mid": float(np.exp(fit.params[2])),
        "slope": float(np.mean(curves @ x) / (x @ x)),
        "to_target": float(np.exp(np.mean(np.log(np.minimum(_crossing(seeds, model), budget))))),
    }
