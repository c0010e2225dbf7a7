"""Designing a study: how its variance splits, and which seeds × problems × samples buy the
smallest detectable effect for the compute.

A contrast (arm − reference, paired by seed and problem: common random numbers) estimated from
n seeds, J eval problems and K samples per problem has, in the crossed decomposition of
`crossed.py`,

    Var(Δ̂) = σ²_seed / n + σ²_problem / J + (σ²_sp + v / K) / (n·J)

σ²_seed the seeds' (training) variance of the difference, σ²_problem the arm × problem
interaction, σ²_sp the seed × problem interaction and v the per-sample variance of the
*difference* (a pilot's residual σ²_resid holds σ²_sp + v / K_pilot). The arms of a seed share
their eval draws (common random numbers: one sampling seed per trial seed), so
v = Var(x_a − x_r) = Var(x_a) + Var(x_r) − 2·Cov(x_a, x_r), not the sum of the arms' Bernoulli
variances: it is estimated from the pilot's paired per-sample differences
(`difference_sample_variance`). Taking the sum, as this module did first, overstated Var(Δ̂)
of Dr. GRPO − GRPO 1.7–2.9× (1.2–1.9× with the seed term at its bound) on a 6-seed pilot at the
quickstart's budget, and on simulated truths its designs had power 0.89–0.97 where its formula
said 0.80–0.84 (`python -m devtools plan-calibration`): it priced small effects too dearly.
Seeds cost a
whole training run each; problems and samples only eval time: the search below prices each
design and finds the cheapest that detects the effect. A pilot of a few seeds underestimates
σ²_seed about half the time (Colas et al. 2018), so designs are judged at its one-sided 80%
upper confidence bound (statistics reference §5.5: MDE at the SD's upper bound, never power
from an observed Δ).

Everything is a pure function of arrays, so tests check it on hand-computed numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats as sps

from ablate.report.stats.crossed import crossed, effective_df, eval_noise_var

SD_UPPER_CONFIDENCE = 0.8
POWER = 0.8
SEEDS = tuple(range(3, 65))
SAMPLES = (1, 2, 4, 8, 16)
MIN_GRID_PROBLEMS = 64


@dataclass(frozen=True)
class VarianceBudget:
    """An arm's per-seed variance of pass@1, split into eval sampling noise and the rest
    (training: the seed's trajectory)."""

    total: float
    eval_noise: float
    training: float  # total − eval noise, clipped at 0
    eval_share: float  # eval_noise / total, at most 1


def variance_budget(y: np.ndarray, samples: int) -> VarianceBudget:
    """Split the per-seed variance of pass@1 from `y[n, J]` (per-(seed, problem) pass rates over
    `samples` samples each): it says whether more seeds or a bigger eval would narrow the
    interval more. NaN below 2 seeds or 2 samples (eval noise cannot be estimated)."""
    y = np.asarray(y, dtype=float)
    if y.shape[0] < 2:
        nan = float("nan")
        return VarianceBudget(nan, nan, nan, nan)
    total = float(np.var(y.mean(axis=-1), ddof=1))  # over seeds
    noise = float(np.mean(eval_noise_var(y, samples)))  # mean over seeds of each seed's
    training = max(0.0, total - noise)
    share = min(1.0, noise / total) if total > 0 else float("nan")
    return VarianceBudget(total, noise, training, share)


@dataclass(frozen=True)
class Components:
    """Variance components of one contrast's per-(seed, problem) differences, as in the module
    docstring; `ms_seed` and `n` (a pilot's seeds) give the seed term's confidence bound."""

    seed_var: float
    problem_var: float
    sp_var: float
    sample_var: float  # v: per-sample variance of the difference, Var(x_a − x_r)
    ms_seed: float = float("nan")  # J_pilot × the variance of the per-seed mean differences
    resid_var: float = float("nan")  # the pilot's σ²_resid = σ²_sp + v / K_pilot
    n: int = 0  # pilot seeds (0: no pilot, no confidence bound)
    problems: int = 0  # pilot problems
    independent_var: float = float("nan")  # Var(x_a) + Var(x_r): v if the arms drew apart


def sample_variance(arm: np.ndarray, ref: np.ndarray, samples: int) -> float:
    """Var(x_a) + Var(x_r): the per-sample Bernoulli variance of arm plus reference (v when the
    arms draw their evals apart), from per-problem pass rates
    ŷ over K samples: mean of ŷ(1 − ŷ)·K/(K − 1), unbiased for p(1 − p). With K = 1 every ŷ(1 − ŷ)
    is 0, so the across-seed means p̄ stand in (biased up by the seeds' spread)."""
    if samples < 2:
        p_arm, p_ref = np.mean(arm, axis=0), np.mean(ref, axis=0)  # [J]
        return float(np.mean(p_arm * (1 - p_arm) + p_ref * (1 - p_ref)))
    binom = arm * (1 - arm) + ref * (1 - ref)  # [n, J]
    return float(np.mean(binom) * samples / (samples - 1))


def difference_sample_variance(arm_draws: np.ndarray, ref_draws: np.ndarray) -> float:
    """v = Var(x_a − x_r) per eval sample, from paired per-sample outcomes `[n, J, K]` (sample k
    of both arms at one seed and problem: the draw they share): the mean over seeds and problems
    of the variance of d_k = x_a,k − x_r,k over the K samples (ddof 1). Unbiased whatever the
    coupling: identical draws give 0, independent ones Var(x_a) + Var(x_r) in expectation (and
    the sample identity Var(a − r) = Var(a) + Var(r) − 2·Cov(a, r) holds exactly). NaN below 2
    samples."""
    d = np.asarray(arm_draws, dtype=float) - np.asarray(ref_draws, dtype=float)
    if d.shape[-1] < 2:
        return float("nan")
    return float(np.mean(np.var(d, axis=-1, ddof=1)))


def contrast_components(
    arm: np.ndarray,
    ref: np.ndarray,
    samples: int,
    draws: tuple[np.ndarray, np.ndarray] | None = None,
) -> Components:
    """Components of arm − reference from a pilot's `arm[n, J]`, `ref[n, J]` (per-(seed,
    problem) pass rates over `samples` samples each, same seeds and problems) and, with `draws`,
    its paired per-sample outcomes `[n, J, K]` (then v is the difference's: common random
    numbers; without them, the arms' sum, as for independent evals). With K = 1 the residual
    cannot be split: v is taken as 0 and the residual as seed × problem, so extra samples are
    priced as buying nothing (safe: a design at K = 1 is priced exactly)."""
    arm, ref = np.asarray(arm, dtype=float), np.asarray(ref, dtype=float)
    n, J = arm.shape
    c = crossed(arm - ref)
    independent = sample_variance(arm, ref, samples)
    v = independent if draws is None else difference_sample_variance(*draws)
    resid = float(c.resid_var)
    if samples < 2:
        v = 0.0
    ms_seed = J * float(np.var((arm - ref).mean(axis=1), ddof=1)) if n >= 2 else float("nan")
    return Components(
        seed_var=float(c.seed_var),
        problem_var=float(c.problem_var),
        sp_var=max(0.0, resid - v / samples),
        sample_var=v,
        ms_seed=ms_seed,
        resid_var=resid,
        n=n,
        problems=J,
        independent_var=independent,
    )


def upper_factor(n: int, confidence: float = SD_UPPER_CONFIDENCE) -> float:
    """(n − 1)/χ²_{1−confidence}(n − 1): a variance estimated on n − 1 df times this is its
    one-sided `confidence` upper bound."""
    return float((n - 1) / sps.chi2.ppf(1 - confidence, n - 1))


def at_upper_bound(c: Components, confidence: float = SD_UPPER_CONFIDENCE) -> Components:
    """`c` with σ²_seed at its upper bound: E[MS_seed] = J·σ²_seed + σ²_resid and MS_seed is
    χ²(n − 1)-distributed, so bound MS_seed and subtract the residual. A seed term the pilot
    clipped to 0 gets a positive bound too. Without a pilot (n < 2), `c` unchanged."""
    if c.n < 2 or not np.isfinite(c.ms_seed):
        return c
    ms_upper = c.ms_seed * upper_factor(c.n, confidence)
    return replace(c, seed_var=max(0.0, (ms_upper - c.resid_var) / c.problems))


def design_variance(c: Components, n, problems, samples) -> np.ndarray:
    """Var(Δ̂) of a design with n seeds, J problems, K samples (broadcast arrays)."""
    n, J, K = (np.asarray(x, dtype=float) for x in (n, problems, samples))
    return c.seed_var / n + c.problem_var / J + (c.sp_var + c.sample_var / K) / (n * J)


def design_df(c: Components, n, problems, samples) -> np.ndarray:
    """Degrees of freedom of the design's Var(Δ̂), by `crossed`'s own rule (`effective_df`) on
    the expected mean squares: n·J·Var = MS_seed + MS_problem − MS_resid, the problem pair
    dropped when the arm × problem component is 0."""
    n, J, K = (np.asarray(x, dtype=float) for x in (n, problems, samples))
    resid = c.sp_var + c.sample_var / K
    ms_seed, ms_problem = J * c.seed_var + resid, n * c.problem_var + resid
    keep_problem = float(c.problem_var > 0)
    terms = [(ms_seed, n - 1), (keep_problem * ms_problem, J - 1)]
    terms.append((-keep_problem * resid, (n - 1) * (J - 1)))
    return effective_df(terms)


def rejection_probability(effect, se, df, alpha: float) -> np.ndarray:
    """Probability that a two-sided t test at `alpha` rejects when the true difference is
    `effect` (noncentral t, the power `mde` inverts; broadcast arrays; 1 without variance)."""
    se, df = np.broadcast_arrays(np.asarray(se, dtype=float), np.asarray(df, dtype=float))
    df = np.where(np.isfinite(df) & (df > 0), df, 1e9)
    crit = sps.t.ppf(1 - alpha / 2, df)
    z = np.abs(effect) / np.where(se > 0, se, 1.0)
    p = sps.nct.sf(crit, df, z) + sps.nct.sf(crit, df, -z)
    return np.where(se > 0, p, float(effect != 0))[()]


def design_power(c: Components, n, problems, samples, effect: float, alpha: float):
    """The power of the design (n, J, K) against a true difference `effect`, components `c`."""
    se = np.sqrt(design_variance(c, n, problems, samples))
    return rejection_probability(effect, se, design_df(c, n, problems, samples), alpha)


def mde(se, df, alpha: float, power: float = POWER) -> np.ndarray:
    """The |Δ| at which a two-sided t test at `alpha` with standard error `se` on `df` degrees
    of freedom has `power` (noncentral t, solved by bisection on Δ / se; broadcast arrays).
    With se = sd/√n and df = n − 1 it is `inference.mde_paired`."""
    se, df = np.broadcast_arrays(np.asarray(se, dtype=float), np.asarray(df, dtype=float))
    df = np.where(np.isfinite(df) & (df > 0), df, 1e9)  # no variance at all: se 0, MDE 0
    crit = sps.t.ppf(1 - alpha / 2, df)

    def reached(z: np.ndarray) -> np.ndarray:
        return sps.nct.sf(crit, df, z) + sps.nct.sf(crit, df, -z) >= power

    low, high = np.zeros(se.shape), 2 * (crit + sps.norm.ppf(power))
    for _ in range(30):  # power rises to 1 in Δ / se: doubling finds an upper end
        if np.all(reached(high)):
            break
        high = np.where(reached(high), high, 2 * high)
    for _ in range(60):
        mid = (low + high) / 2
        ok = reached(mid)
        low, high = np.where(ok, low, mid), np.where(ok, mid, high)
    return (high * se)[()]


@dataclass(frozen=True)
class Cost:
    """Seconds of one trial: training plus evals × J × K × seconds per eval sample; a study of
    n seeds runs `trials_per_seed`·n + `fixed_trials` trials on `workers` processes."""

    train_seconds: float
    eval_sample_seconds: float
    evals: float  # evals per trial (start, cadence, final)
    trials_per_seed: int
    fixed_trials: int = 0
    workers: int = 1
    fixed_seconds: float = 0.0
    """Seconds spent whatever the design: the arms' tuning (`ablate.study.tuning`)."""

    def trial_seconds(self, problems, samples):
        """One trial's seconds at J problems × K samples per eval (arrays broadcast)."""
        return self.train_seconds + self.evals * problems * samples * self.eval_sample_seconds

    def hours(self, n, problems, samples) -> np.ndarray:
        n, J, K = (np.asarray(x, dtype=float) for x in (n, problems, samples))
        trial = self.trial_seconds(J, K)
        seconds = (self.trials_per_seed * n + self.fixed_trials) * trial + self.fixed_seconds
        return seconds / self.workers / 3600


@dataclass(frozen=True)
class Design:
    seeds: int
    problems: int
    samples: int
    hours: float
    mde: float  # the largest over the family's contrasts, at the seed term's upper bound


def problem_grid(split: int) -> tuple[int, ...]:
    """64, 128, 256, … below the eval split's size, and the whole split."""
    grid = [j for j in (MIN_GRID_PROBLEMS * 2**i for i in range(20)) if j < split]
    return (*grid, split)


def designs(
    components: Sequence[Components],
    cost: Cost,
    alpha: float,
    problems: Sequence[int],
    seeds: Sequence[int] = SEEDS,
    samples: Sequence[int] = SAMPLES,
) -> list[Design]:
    """Every design of the grid with its hours and MDE (the worst contrast's, each contrast at
    its seed term's upper bound; `alpha` already divided by the family size)."""
    n, J, K = (a.ravel() for a in np.meshgrid(seeds, problems, samples, indexing="ij"))
    worst = np.zeros(n.shape)
    for c in map(at_upper_bound, components):
        se = np.sqrt(design_variance(c, n, J, K))
        worst = np.maximum(worst, mde(se, design_df(c, n, J, K), alpha))
    hours = cost.hours(n, J, K)
    rows = zip(n, J, K, hours, worst, strict=True)
    return [Design(int(a), int(b), int(c), float(h), float(m)) for a, b, c, h, m in rows]


def recommend(grid: Sequence[Design], effect: float, budget_hours: float) -> Design | None:
    """The cheapest design within budget whose MDE reaches `effect`; if none does, the one
    within budget with the smallest MDE; None when nothing fits the budget."""
    affordable = [d for d in grid if d.hours <= budget_hours]
    reaching = [d for d in affordable if d.mde <= effect]
    if reaching:
        return min(reaching, key=lambda d: (d.hours, d.mde))
    return min(affordable, key=lambda d: (d.mde, d.hours)) if affordable else None


def frontier(grid: Sequence[Design], effect: float, budget_hours: float) -> list[Design]:
    """Per (J, K): the fewest seeds reaching `effect` within budget, cheapest first; if no
    design reaches it, per (J, K) the most seeds within budget, smallest MDE first."""
    affordable = [d for d in grid if d.hours <= budget_hours]
    reaching = [d for d in affordable if d.mde <= effect]
    best: dict[tuple[int, int], Design] = {}
    for d in reaching or affordable:
        key, held = (d.problems, d.samples), best.get((d.problems, d.samples))
        if reaching:
            better = held is None or (d.hours, d.mde) < (held.hours, held.mde)
        else:
            better = held is None or (d.mde, d.hours) < (held.mde, held.hours)
        if better:
            best[key] = d
    order = (lambda d: (d.hours, d.mde)) if reaching else (lambda d: (d.mde, d.hours))
    return sorted(best.values(), key=order)
