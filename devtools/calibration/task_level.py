"""Whole studies simulated problem by problem, with fresh problems each study: the ground truth
for the task-level (seeds × problems) inference of `ablate.report.stats.crossed`.

`devtools.calibration.simulate` draws one eval set per study and defines the truth given that
set; a claim about the task needs the truth over the task's problem population, and a study
whose J problems are a fresh sample of it. The model, per study:

- problems: logit p_j ~ N(logit(base_pass), problem_sd²), drawn afresh for every study;
- interaction: arm a >= 1 adds τ·z_{a,j} to problem j's logit, z ~ N(0, 1) (`interaction` = τ;
  arm 0, the reference, adds nothing), so arms rank the problems differently;
- training: seed s of arm a shifts every logit by u_{a,s} = σ·(√ρ·c_s + √(1−ρ)·e_{a,s}) with c, e
  standard normal (ρ = `shared_fraction`, the share of the seed variance common to the arms of a
  seed). σ is given by `seed_sd`, the SD over seeds of a seed's expected pass@1 on the whole task
  (the population mean over problems, so σ does not change with J), solved for normal seeds at
  arm 0 and kept for every scenario. With `heavy_tails` every u of seed s is multiplied by
  √W_s, W_s = 1/V_s, V_s ~ χ²₃ shared by the arms of the seed: each run's u is then σ/√3 times a
  Student t with 3 df (the same SD σ) and the arms still correlate by ρ;
- divergence: each run of arm a diverges with probability q_a (`divergence`: one q for every
  arm, or one per arm), independently; a diverged run scores 0 on every problem (the hurdle
  reading counts it as pass@1 = 0; `TaskStudies.alive` says which runs survived);
- effects: arm a adds a logit shift δ_a, solved once so that the TASK truths differ by exactly
  `effects[a]`, truth_a = (1 − q_a)·μ_a with μ_a = E expit(logit p + δ_a + u + τ_a·z) over
  problems, z and u, the survivors' mean (with τ > 0 and effect 0 the arms differ problem by
  problem but not over the task); with `survivor_effects` the survivors' means differ by
  `effects[a]` instead (μ_a − μ_0), whatever the divergence;
- eval: K = `samples` samples of problem j by run (a, s) are correct iff U_{s,j,k} < p_{a,s,j};
  with `shared_eval_noise` the arms of a seed share U (common random numbers), else each run
  draws its own (a binomial per problem).

Given W, logit p + u + τ_a·z is normal, so a task truth is a 1-D Gauss–Hermite integral (times
a generalised Gauss–Laguerre one over V with heavy tails).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special

from ablate.base.errors import ConfigError
from devtools.calibration.simulate import BLOCK, normal_nodes, sigma_for_seed_sd

POPULATION = 10**12  # "problems" at which sigma_for_seed_sd reads the whole task's seed SD
T_DF = 3  # heavy-tailed seeds: Student t with this many df


@dataclass(frozen=True)
class TaskModel:
    arms: int = 4
    seeds: int = 5
    problems: int = 64
    samples: int = 8
    base_pass: float = 0.5
    problem_sd: float = 2.0
    seed_sd: float = 0.035  # SD over seeds of a seed's expected pass@1 on the whole task
    shared_fraction: float = 0.5  # ρ
    interaction: float = 0.0  # τ: arm × problem logit SD of arms 1..
    shared_eval_noise: bool = True
    heavy_tails: bool = False
    divergence: float | tuple[float, ...] = 0.0  # q (per arm): P(a run diverges: scores 0)
    effects: tuple[float, ...] | None = None  # task-level pass@1 differences, effects[0] = 0
    survivor_effects: bool = False  # effects are differences of the survivors' means

    def __post_init__(self) -> None:
        if min(self.arms, self.seeds, self.problems, self.samples) < 1:
            raise ConfigError("arms, seeds, problems and samples must each be at least 1")
        if not 0 < self.base_pass < 1:
            raise ConfigError(f"base_pass is a pass rate in (0, 1), got {self.base_pass}")
        if not self.seed_sd > 0 or not self.problem_sd >= 0 or not self.interaction >= 0:
            raise ConfigError("seed_sd must be > 0, problem_sd and interaction >= 0")
        if not 0 <= self.shared_fraction <= 1:
            raise ConfigError(f"shared_fraction is a share in [0, 1], got {self.shared_fraction}")
        q = np.atleast_1d(np.asarray(self.divergence, dtype=float))
        if len(q) not in (1, self.arms) or not np.all((q >= 0) & (q < 1)):
            raise ConfigError(
                f"divergence is a probability in [0, 1), one or one per arm; got {self.divergence}"
            )
        if self.effects is not None and (len(self.effects) != self.arms or self.effects[0] != 0):
            raise ConfigError("effects needs one value per arm, and 0 for the reference arm 0")

    @property
    def sigma(self) -> float:
        """Logit SD of a run's training outcome u."""
        return sigma_for_seed_sd(self.seed_sd, self.base_pass, self.problem_sd, POPULATION)

    @property
    def qs(self) -> np.ndarray:
        """Divergence probability per arm: [A]."""
        return np.broadcast_to(np.asarray(self.divergence, dtype=float), (self.arms,)).copy()

    @property
    def spreads(self) -> np.ndarray:
        """Logit SD of τ_a·z per arm: [A] (0 for the reference)."""
        return np.r_[0.0, np.full(self.arms - 1, self.interaction)]


@dataclass(frozen=True)
class TaskStudies:
    y: np.ndarray  # [studies, arms, seeds, problems] per-(run, problem) pass rate, float32
    truth: np.ndarray  # [arms] task truth: expected pass@1 over problems, seeds, eval, divergence
    fixed: np.ndarray | None  # [studies, arms] truth given each study's problems and z
    shift: np.ndarray  # [arms] the logit effect δ_a
    sigma: float
    alive: np.ndarray | None = None  # [studies, arms, seeds] bool: the run did not diverge
    survivors: np.ndarray | None = None  # [arms] the survivors' task truth μ_a


@functools.cache
def mixing_nodes(heavy: bool, k: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of E[g(W)] for the seed-variance multiplier W: [k], [k]. Normal seeds:
    W = 1. Heavy tails: W = 1/V, V ~ χ²₃ (E W = 1), by generalised Gauss–Laguerre in V/2."""
    if not heavy:
        return np.ones(1), np.ones(1)
    x, w = special.roots_genlaguerre(k, T_DF / 2 - 1)
    return 1 / (2 * x), w / w.sum()


def task_mean(
    model: TaskModel, shift: float, spread: float, sigma: float, q: float | None = None
) -> float:
    """(1 − q)·E expit(logit base + shift + N(0, problem_sd² + spread² + σ²W)), over W; q is
    arm 0's divergence unless given."""
    x, wx = normal_nodes(200)
    w_nodes, w_weights = mixing_nodes(model.heavy_tails)
    sd = np.sqrt(model.problem_sd**2 + spread**2 + sigma**2 * w_nodes)  # [m]
    p = special.expit(special.logit(model.base_pass) + shift + sd[:, None] * x)  # [m, 200]
    q = model.qs[0] if q is None else q
    return float((1 - q) * (w_weights @ (p @ wx)))


def task_truth(model: TaskModel, sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-arm logit shifts δ and task truths: ([A], [A]); truth_a − truth_0 = effects[a] (or
    the survivors' means differ by effects[a], with `survivor_effects`)."""
    effects = np.zeros(model.arms) if model.effects is None else np.asarray(model.effects, float)
    qs = model.qs
    keep = np.zeros(model.arms) if model.survivor_effects else qs  # q the target is read with
    target = task_mean(model, 0.0, 0.0, sigma, keep[0]) + effects
    if np.any((target <= 0) | (target >= 1 - keep)):
        raise ConfigError("an effect moves an arm's task pass@1 out of reach; make it smaller")
    shift = np.zeros(model.arms)
    for a, spread in enumerate(model.spreads):
        if a == 0 or (spread == 0 and effects[a] == 0 and keep[a] == keep[0]):
            continue
        gap = lambda d, a=a, s=spread: task_mean(model, d, s, sigma, keep[a]) - target[a]  # noqa: E731
        shift[a] = optimize.brentq(gap, -60.0, 60.0, xtol=1e-13)
    return shift, target * (1 - qs) / (1 - keep)


def _seed_shifts(model: TaskModel, sigma: float, c: int, rng: np.random.Generator) -> np.ndarray:
    """u [c, A, n]: normal, or multivariate t (one χ² per seed) with heavy tails."""
    rho, n = model.shared_fraction, model.seeds
    z = np.sqrt(rho) * rng.standard_normal((c, 1, n))
    z = z + np.sqrt(1 - rho) * rng.standard_normal((c, model.arms, n))
    if model.heavy_tails:
        z = z / np.sqrt(rng.chisquare(T_DF, (c, 1, n)))  # σ²·E[1/V] = σ²
    return sigma * z


def _fixed_truth(model: TaskModel, logits: np.ndarray, sigma: float) -> np.ndarray:
    """Truth given the study's problems and z: logits [c, A, J] (δ and τz in) -> [c, A]."""
    x, wx = normal_nodes(12)
    w_nodes, w_weights = mixing_nodes(model.heavy_tails, 8)
    u = (sigma * np.sqrt(w_nodes)[:, None] * x).ravel()  # [m·12]
    wu = (w_weights[:, None] * wx).ravel()
    return (1 - model.qs) * (special.expit(logits[..., None] + u).mean(axis=2) @ wu)


def _draw(model: TaskModel, sigma: float, shift: np.ndarray, c: int, rng, fixed: bool) -> tuple:
    """One chunk of c studies: (y [c, A, n, J] float32, fixed truth [c, A] or None, alive
    [c, A, n] bool)."""
    a, n, j, k = model.arms, model.seeds, model.problems, model.samples
    logits = special.logit(model.base_pass) + model.problem_sd * rng.standard_normal((c, 1, j))
    logits = logits + shift[:, None] + model.spreads[:, None] * rng.standard_normal((c, a, j))
    u = _seed_shifts(model, sigma, c, rng)
    p = special.expit(logits[:, :, None, :] + u[..., None]).astype(np.float32)  # [c, A, n, J]
    if model.shared_eval_noise:  # one draw per (seed, problem, sample), shared by the arms
        draws = rng.random((c, 1, n, j, k), dtype=np.float32)
        y = np.count_nonzero(draws < p[..., None], axis=-1).astype(np.float32) / k
    else:
        y = (rng.binomial(k, p) / k).astype(np.float32)
    alive = np.ones((c, a, n, 1), dtype=bool)
    if model.qs.any():
        alive = rng.random((c, a, n, 1)) >= model.qs[:, None, None]
        y *= alive
    return y, (_fixed_truth(model, logits, sigma) if fixed else None), alive[..., 0]


def simulate_task(
    model: TaskModel,
    studies: int,
    rng: np.random.Generator | int | Sequence[int] | None = None,
    fixed: bool = True,
) -> TaskStudies:
    """Simulate `studies` independent studies, each on fresh problems (deterministic per seed);
    `fixed` also computes the truth given each study's problems."""
    if studies < 1:
        raise ConfigError(f"studies must be at least 1, got {studies}")
    rng = np.random.default_rng(rng)
    sigma = model.sigma
    shift, truth = task_truth(model, sigma)
    per_study = model.arms * model.problems * max(model.seeds * model.samples, 12 * 8)
    chunk = max(1, BLOCK // per_study)
    parts = [
        _draw(model, sigma, shift, min(chunk, studies - s), rng, fixed)
        for s in range(0, studies, chunk)
    ]
    y = np.concatenate([p[0] for p in parts])
    fixed_truth = np.concatenate([p[1] for p in parts]) if fixed else None
    alive = np.concatenate([p[2] for p in parts])
    return TaskStudies(y, truth, fixed_truth, shift, sigma, alive, truth / (1 - model.qs))
