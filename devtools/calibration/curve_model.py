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

Besides ScaleRL's sigmoid (`shape` "sigmoid"), two shapes it does not fit, on which a plateau
must not be claimed where none is seen:
- "log-linear": a straight line in log compute, R0 + slope·log10(C / c_start) from c_start on
  (each seed's slope × exp(log_sd·z)): no plateau within or far beyond the observed compute;
- "two-phase": the sigmoid, then a second rise of `gain2` on top of its plateau,
  gain2 / (1 + (C_mid2 / C)^b2) (each seed's C_mid2 × exp(log_sd·z)), after the observed
  compute or within it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ablate.report.curves.analysis import TrialCurve
from ablate.report.curves.fit import A_STEP, sigmoid
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
    shape: str = "sigmoid"  # or "log-linear", "two-phase" (module docstring)
    slope: float = 0.12  # log-linear: pass@1 per tenfold compute ...
    c_start: float = 10_000.0  # ... from this compute on (R0 before it)
    gain2: float = 0.0  # two-phase: the second rise above the first plateau A ...
    b2: float = 2.5  # ... its B ...
    c_mid2: float = 3_000_000.0  # ... and its midpoint


def _draw(model: CurveModel, rng: np.random.Generator, size: int) -> np.ndarray:
    """Seeds' (A, B, C_mid, C_mid2, slope) [size, 5] (the sigmoid's draws first, so its
    random stream is the same whatever the shape; the last two drawn only for their shapes)."""
    a = model.a + model.a_sd * rng.standard_normal(size)
    b, c_mid = np.exp(
        np.log([[model.b], [model.c_mid]]) + model.log_sd * rng.standard_normal((2, size))
    )
    c_mid2, slope = np.full(size, model.c_mid2), np.full(size, model.slope)
    if model.shape == "two-phase":
        c_mid2 = c_mid2 * np.exp(model.log_sd * rng.standard_normal(size))
    if model.shape == "log-linear":
        slope = slope * np.exp(model.log_sd * rng.standard_normal(size))
    return np.stack([a, b, c_mid, c_mid2, slope], axis=1)


def mean_curve(model: CurveModel, truth: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Seeds' expected pass@1 at compute `c` [points] from their draws `truth` [seeds, 5]
    -> [seeds, points] (a single seed's [5] -> [points])."""
    t = np.asarray(truth, dtype=float)
    a, b, c_mid, c_mid2, slope = (t[..., k, None] for k in range(5))
    c = np.asarray(c, dtype=float)
    if model.shape == "log-linear":
        out = model.r0 + slope * np.log10(np.maximum(c / model.c_start, 1.0))
    else:
        out = sigmoid(c, a, b, c_mid, model.r0)
        if model.shape == "two-phase":
            out = out + model.gain2 * sigmoid(c, 1.0, model.b2, c_mid2, 0.0)
    return out


def _wander(model: CurveModel, rng: np.random.Generator, n: int) -> np.ndarray:
    w = np.empty(n)
    w[0] = model.wander_sd * rng.standard_normal()
    innovation = model.wander_sd * np.sqrt(1 - model.wander_rho**2)
    for i in range(1, n):
        w[i] = model.wander_rho * w[i - 1] + innovation * rng.standard_normal()
    return w


def simulate_seed(model: CurveModel, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """(compute, observed pass@1, observed R0, the seed's draws (A, B, C_mid, C_mid2, slope))."""
    truth = _draw(model, rng, 1)[0]
    c = np.asarray(model.points, dtype=float)
    p = np.clip(mean_curve(model, truth, c) + _wander(model, rng, len(c)), 0.001, 0.999)
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


def _crossing(truth: np.ndarray, model: CurveModel, budget: float) -> np.ndarray:
    """Each seed's true compute to the target [seeds] (inf where it stays below it): exact for
    a sigmoid, else read off its expected curve on a fine log grid up to the budget."""
    if model.shape == "sigmoid":
        a, b, c_mid = truth[:, :3].T
        gain = (a - model.r0) / (model.target - model.r0)
        with np.errstate(invalid="ignore", divide="ignore"):
            c = c_mid / (gain - 1.0) ** (1.0 / b)
        return np.where(gain > 1, c, np.inf)
    grid = np.geomspace(min(model.points) / 100, budget, 4001)
    above = mean_curve(model, truth, grid) >= model.target  # [seeds, grid]
    first = np.where(above.any(axis=1), grid[np.argmax(above, axis=1)], np.inf)
    return first


def _plateau(model: CurveModel, seeds: np.ndarray, budget: float) -> tuple[float, float]:
    """(the asymptote the observed compute shows, the final one): the seeds' mean A for a
    sigmoid; for two phases the first plateau where the second rise adds less than the A grid's
    step by the budget (it lies after the observed compute), else the final A + gain2; none
    (NaN) for a line in log compute, which has no plateau."""
    if model.shape == "log-linear":
        return float("nan"), float("nan")
    if model.shape == "sigmoid":
        return model.a, model.a
    final = model.a + model.gain2
    seen = model.gain2 * float(np.mean(sigmoid(budget, 1.0, model.b2, seeds[:, 3], 0.0)))
    return (model.a if seen < A_STEP else final), final


@lru_cache(maxsize=32)
def truths(model: CurveModel, draws: int = 4000) -> dict[str, float]:
    """What the report's intervals estimate, by Monte Carlo over the seed distribution: the
    asymptote A the observed compute shows (`_plateau`; "a final": the curve's last one);
    B and C_mid of the sigmoid that best fits the arm's expected curve over the observed
    compute (the pooled fit's estimand; none for a line in log compute), the mean slope per
    decade, and the restricted geometric mean of the compute to the target at the budget."""
    rng = np.random.default_rng(12345)
    seeds = _draw(model, rng, draws)
    c = np.asarray(model.points, dtype=float)
    c = c[c > model.warmup]
    curves = mean_curve(model, seeds, c)  # [seeds, points]
    fit = pooled_fit({0: (c, curves.mean(axis=0), model.r0)}, jackknife=False, bend=False)
    shaped = model.shape != "log-linear"
    x = np.log10(c) - np.log10(c).mean()
    budget = float(c.max())
    a, final = _plateau(model, seeds, budget)
    return {
        "a": a,
        "a final": final,
        "b": float(np.exp(fit.params[1])) if shaped else float("nan"),
        "c_mid": float(np.exp(fit.params[2])) if shaped else float("nan"),
        "slope": float(np.mean(curves @ x) / (x @ x)),
        "to_target": float(
            np.exp(np.mean(np.log(np.minimum(_crossing(seeds, model, budget), budget))))
        ),
    }
