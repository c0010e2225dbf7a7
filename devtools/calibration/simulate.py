"""Whole studies simulated in bulk, to check that the report's statistics are calibrated.

A study is `arms` × `seeds` training runs, each evaluated on the study's `problems` eval problems
with `samples` samples per problem (pass@1 = the mean over problems and samples). The model:

- problems: logit p_j ~ N(logit(base_pass), problem_sd²), drawn once per study and shared by
  every arm and seed (one eval set); problem_sd = 2 puts many problems near 0 or 1;
- training: seed s of arm a shifts every logit by u_{a,s} = σ·(√ρ·c_s + √(1−ρ)·e_{a,s}) with c, e
  standard normal: ρ (`shared_fraction`) is the share of the seed-level variance common to the
  arms of one seed (same data order, same init), so u ~ N(0, σ²) for every run;
- effects: arm a adds a logit shift δ_a, solved per study so that truth_a − truth_0 equals
  `effects[a]` exactly on the pass@1 scale (arm 0 is the reference; effects[0] must be 0);
- eval: sample k of problem j for run (a, s) is correct iff U_{s,j,k} < p_{a,s,j} with
  p_{a,s,j} = expit(logit p_j + δ_a + u_{a,s}); with `shared_eval_noise` the arms of a seed share
  U (what common random numbers do), else each run draws its own;
- truth_a = E_u[mean_j expit(logit p_j + δ_a + u)], u ~ N(0, σ²): the expected pass@1 of arm a over
  the seed distribution and the eval noise, given the study's problems (Gauss–Hermite over u);
- σ is solved so that the SD over seeds of a seed's expected pass@1 (mean_j p_{a,s,j}, no eval
  noise) equals `seed_sd`, averaged over problem sets: Var = V + (W − V)/J, where V is the variance
  over u of the population mean E_j expit(·) and W the mean over problems of each problem's
  variance over u (2-D Gauss–Hermite). The observed SD adds the eval noise on top.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special

from ablate.base.errors import ConfigError

BLOCK = 2**24  # array elements per study chunk: bounds memory whatever the number of studies
MAX_SIGMA = 60.0  # logit SD beyond which pass@1 per seed is already a coin flip


@dataclass(frozen=True)
class StudyModel:
    arms: int = 4
    seeds: int = 5
    problems: int = 64
    samples: int = 8
    base_pass: float = 0.5
    problem_sd: float = 2.0
    seed_sd: float = 0.035  # SD over seeds of a seed's expected pass@1 (the real study's)
    shared_fraction: float = 0.5  # ρ
    shared_eval_noise: bool = True
    effects: tuple[float, ...] | None = None  # pass@1 scale, one per arm, effects[0] = 0

    def __post_init__(self) -> None:
        if min(self.arms, self.seeds, self.problems, self.samples) < 1:
            raise ConfigError("arms, seeds, problems and samples must each be at least 1")
        if not 0 < self.base_pass < 1:
            raise ConfigError(f"base_pass is a pass rate in (0, 1), got {self.base_pass}")
        if not self.seed_sd > 0 or not self.problem_sd >= 0:
            raise ConfigError("seed_sd must be > 0 and problem_sd >= 0")
        if not 0 <= self.shared_fraction <= 1:
            raise ConfigError(f"shared_fraction is a share in [0, 1], got {self.shared_fraction}")
        if self.effects is not None and (len(self.effects) != self.arms or self.effects[0] != 0):
            raise ConfigError("effects needs one value per arm, and 0 for the reference arm 0")


@dataclass(frozen=True)
class Studies:
    observed: np.ndarray  # [studies, arms, seeds] observed pass@1 of each run
    expected: np.ndarray  # [studies, arms, seeds] a run's expected pass@1 (no eval noise)
    truth: np.ndarray  # [studies, arms] expected pass@1 of the arm given the study's problems
    shift: np.ndarray  # [studies, arms] the logit effect δ solved for each arm
    sigma: float  # logit SD of the training outcome u


@functools.cache
def normal_nodes(k: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss–Hermite nodes and weights for E[g(Z)], Z ~ N(0, 1): [k], [k] (weights sum to 1)."""
    x, w = np.polynomial.hermite_e.hermegauss(k)
    return x, w / w.sum()


def seed_sd_of_sigma(sigma: float, base_pass: float, problem_sd: float, problems: int) -> float:
    """SD over seeds of a seed's expected pass@1 for logit SD sigma, averaged over problem sets."""
    xl, wl = normal_nodes(96)
    xu, wu = normal_nodes(48)
    f = special.expit(special.logit(base_pass) + problem_sd * xl[:, None] + sigma * xu)  # [l, u]
    population = wl @ f  # [u]: the mean over the problem distribution at each u
    v = wu @ population**2 - (wu @ population) ** 2
    w = wl @ (f**2 @ wu - (f @ wu) ** 2)
    return float(np.sqrt(max(v + (w - v) / problems, 0.0)))


def sigma_for_seed_sd(seed_sd: float, base_pass: float, problem_sd: float, problems: int) -> float:
    """The logit SD σ whose seeds spread a seed's expected pass@1 by seed_sd."""
    top = seed_sd_of_sigma(MAX_SIGMA, base_pass, problem_sd, problems)
    if not 0 < seed_sd < top:
        raise ConfigError(
            f"seed_sd must be in (0, {top:.3f}): no logit spread moves pass@1 more with "
            f"base_pass {base_pass:g} and problem_sd {problem_sd:g}; got {seed_sd}"
        )

    def gap(sigma: float) -> float:
        return seed_sd_of_sigma(sigma, base_pass, problem_sd, problems) - seed_sd

    return float(optimize.brentq(gap, 0.0, MAX_SIGMA, xtol=1e-12))


def _truth(logits: np.ndarray, shift: np.ndarray, sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """Expected pass@1 and its derivative in the shift: logits [c, J], shift [c, k] -> [c, k]."""
    x, w = normal_nodes(16)
    p = special.expit(logits[:, None, :, None] + shift[:, :, None, None] + sigma * x)
    return (p.mean(axis=2) @ w), ((p * (1 - p)).mean(axis=2) @ w)


def _solve_shifts(logits: np.ndarray, target: np.ndarray, sigma: float) -> np.ndarray:
    """Logit shifts whose truth equals target: logits [c, J], target [c, k] -> [c, k]. Newton's
    method kept inside a shrinking bracket, since the truth is monotone in the shift."""
    if np.any((target <= 0) | (target >= 1)):
        raise ConfigError(
            "an effect moves an arm's expected pass@1 outside (0, 1); make it smaller"
        )
    low, high = np.full(target.shape, -4 * MAX_SIGMA), np.full(target.shape, 4 * MAX_SIGMA)
    shift = np.zeros(target.shape)
    for _ in range(100):
        value, slope = _truth(logits, shift, sigma)
        gap = value - target
        if np.max(np.abs(gap)) < 1e-12:
            break
        low, high = np.where(gap < 0, shift, low), np.where(gap > 0, shift, high)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = shift - gap / slope
        shift = np.where((step > low) & (step < high), step, (low + high) / 2)
    return shift


def _shifts_and_truth(
    model: StudyModel, logits: np.ndarray, sigma: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per-arm logit effects and truths for a chunk of studies: logits [c, J] -> [c, A], [c, A]."""
    c = len(logits)
    base, _ = _truth(logits, np.zeros((c, 1)), sigma)  # [c, 1]
    effects = np.zeros(model.arms) if model.effects is None else np.asarray(model.effects, float)
    shift, truth = np.zeros((c, model.arms)), np.repeat(base, model.arms, axis=1)
    moved = np.flatnonzero(effects)  # arms without an effect share arm 0's truth: no quadrature
    if len(moved):  # solved to 1e-12, so the truth is the target
        truth[:, moved] = base + effects[moved]
        shift[:, moved] = _solve_shifts(logits, truth[:, moved], sigma)
    return shift, truth


def _draw(model: StudyModel, sigma: float, c: int, rng: np.random.Generator) -> tuple:
    """One chunk of c studies: (observed, expected [c, A, n], truth, shift [c, A])."""
    a, n, j, k = model.arms, model.seeds, model.problems, model.samples
    logits = special.logit(model.base_pass) + model.problem_sd * rng.standard_normal((c, j))
    shift, truth = _shifts_and_truth(model, logits, sigma)
    rho = model.shared_fraction
    u = sigma * (
        np.sqrt(rho) * rng.standard_normal((c, 1, n))
        + np.sqrt(1 - rho) * rng.standard_normal((c, a, n))
    )  # [c, A, n]
    p = special.expit(logits[:, None, None, :] + (shift[:, :, None] + u)[..., None])  # [c,A,n,J]
    if model.shared_eval_noise:
        # one draw per (seed, problem, sample) for all arms; float32 (p to within 6e-8) halves
        # the memory traffic of the [c, A, n, J, K] comparison
        draws = rng.random((c, 1, n, j, k), dtype=np.float32)
        correct = np.count_nonzero(draws < p.astype(np.float32)[..., None], axis=(3, 4))
    else:
        correct = rng.binomial(k, p).sum(axis=3)  # independent draws: a binomial per problem
    return correct / (j * k), p.mean(axis=3), truth, shift


def simulate(
    model: StudyModel, studies: int, rng: np.random.Generator | int | Sequence[int] | None = None
) -> Studies:
    """Simulate `studies` independent studies of the model (deterministic for a given seed)."""
    if studies < 1:
        raise ConfigError(f"studies must be at least 1, got {studies}")
    rng = np.random.default_rng(rng)
    sigma = sigma_for_seed_sd(model.seed_sd, model.base_pass, model.problem_sd, model.problems)
    # the eval draws [A, n, J, K] or, with few seeds and samples, the quadrature [A, J, 16]
    per_study = model.arms * model.problems * max(model.seeds * model.samples, 16)
    chunk = max(1, BLOCK // per_study)
    parts = [
        _draw(model, sigma, min(chunk, studies - start), rng) for start in range(0, studies, chunk)
    ]
    observed, expected, truth, shift = (np.concatenate(x) for x in zip(*parts, strict=True))
    return Studies(observed, expected, truth, shift, sigma)
