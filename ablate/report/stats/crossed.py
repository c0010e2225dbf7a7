"""Task-level inference: seeds and eval problems as two crossed random samples.

An eval reads J problems of a task's eval split, K samples each, for every seed; the report's
question is about the task (the population those J problems were drawn from) and about the
training seed distribution, so an arm's mean — and a contrast's — carries two sampling errors:
which seeds, and which problems. With `y[s, j]` the pass rate of seed s on problem j (the mean of
its K samples), the two-way random-effects ANOVA without replication gives

    E[MS_seed]    = J·σ²_seed    + σ²_resid
    E[MS_problem] = n·σ²_problem + σ²_resid
    E[MS_resid]   = σ²_resid                    (seed × problem, eval sampling noise in it)

and Var(mean) = σ²_seed / n + σ²_problem / J + σ²_resid / (n·J), i.e. (MS_seed + MS_problem −
MS_resid) / (n·J). Components are estimated by the method of moments and clipped at 0 for display;
the variance of the mean keeps MS_seed whole and clips only the problem part, MS_problem −
MS_resid, at 0 (then it is the fixed-set reading, MS_seed / (n·J) on n − 1 df). Clipping the seed
part too, as this module did first, dropped the seed variance whenever MS_seed fell below
MS_resid by chance (with 3 seeds, 2 df: often) and then claimed the resid's hundreds of df; the
interval is Student-t at the Satterthwaite df of the mean squares at their upper confidence
bounds (`effective_df`), since plain Satterthwaite, fed the same noisy seed mean square as the
variance, runs high exactly when that mean square is small by chance. With 3 seeds both made the
marks fire on null arms in up to 14% of studies (`python -m devtools calibrate --task-level`
shows the rules side by side).

For a contrast, `y` holds the per-(seed, problem) differences arm − reference (common random
numbers: the same seeds and problems), and σ²_problem is the arm × problem interaction, the term a
fixed-problem analysis leaves out.

Everything takes `[..., n, J]` arrays so the calibration (`devtools.calibration`) simulates the
very code the report runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from ablate.report.stats.inference import CONFIDENCE, MIN_SEEDS, Estimate

EQUIVALENCE_CONFIDENCE = 0.90  # TOST at alpha 0.05: the 90% interval inside ±margin
ZERO_VAR = 1e-24  # Var(mean) below this (relative): rounding of identical values, no variance
DF_BOUND = 0.10  # effective_df reads each mean square at its upper 90% confidence bound


@dataclass(frozen=True)
class Crossed:
    """The mean of `y[..., n, J]` with its task-level standard error: arrays over `...`."""

    mean: np.ndarray
    se: np.ndarray  # sqrt of Var(mean) over seeds and problems
    df: np.ndarray  # degrees of freedom (effective_df)
    seed_var: np.ndarray  # σ²_seed (clipped at 0; the variance of the mean keeps MS_seed)
    problem_var: np.ndarray  # σ²_problem (clipped at 0); a contrast's arm × problem interaction
    resid_var: np.ndarray  # σ²_resid: seed × problem interaction plus eval sampling noise
    n: int
    problems: int
    ms_seed: np.ndarray = np.nan  # MS_seed: the variance of the mean keeps it whole

    def half_width(self, confidence: float = CONFIDENCE) -> np.ndarray:
        """NaN below MIN_SEEDS or with no variance at all (no interval, as no p-value)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            half = sps.t.ppf((1 + confidence) / 2, self.df) * self.se
        return np.where((self.n < MIN_SEEDS) | ~(self.se > 0), np.nan, half)[()]

    def p_value(self) -> np.ndarray:
        """Two-sided t test of mean = 0; NaN below MIN_SEEDS or with no variance at all (a
        zero-variance difference is no evidence either way, not p = 0)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            p = 2 * sps.t.sf(np.abs(self.mean) / self.se, self.df)
        bad = (self.n < MIN_SEEDS) | ~(self.se > 0)
        return np.where(bad, np.nan, p)[()]


def crossed(y: np.ndarray) -> Crossed:
    """Two-way random-effects summary of `y[..., n, J]` (seeds × problems, no NaN)."""
    y = np.asarray(y, dtype=float)
    n, J = y.shape[-2], y.shape[-1]
    grand = y.mean(axis=(-2, -1))
    seed_means, problem_means = y.mean(axis=-1), y.mean(axis=-2)  # [..., n], [..., J]
    with np.errstate(invalid="ignore", divide="ignore"):
        ms_seed = J * ((seed_means - grand[..., None]) ** 2).sum(-1) / (n - 1)
        ms_problem = n * ((problem_means - grand[..., None]) ** 2).sum(-1) / (J - 1)
        resid = y - seed_means[..., None] - problem_means[..., None, :] + grand[..., None, None]
        ms_resid = (resid**2).sum(axis=(-2, -1)) / ((n - 1) * (J - 1))
    if J == 1:  # one problem: no problem term, the seed means carry everything
        ms_problem, ms_resid = np.zeros_like(grand), np.zeros_like(grand)
    keep_problem = ms_problem > ms_resid
    # Var(mean)·nJ = MS_seed + max(MS_problem − MS_resid, 0): the seed mean square always stays in
    c_problem = keep_problem.astype(float)
    terms = [(ms_seed, n - 1), (c_problem * ms_problem, J - 1)]
    terms.append((-c_problem * ms_resid, (n - 1) * (J - 1)))
    var = sum(t for t, _ in terms) / (n * J)
    var = np.where(var > ZERO_VAR * np.maximum(grand**2, 1.0), var, 0.0)  # rounding, not spread
    return Crossed(
        mean=grand[()],
        se=np.sqrt(np.maximum(var, 0.0))[()],
        df=np.asarray(effective_df(terms))[()],
        seed_var=np.where(ms_seed > ms_resid, (ms_seed - ms_resid) / J, 0.0)[()],
        problem_var=np.where(keep_problem, (ms_problem - ms_resid) / n, 0.0)[()],
        resid_var=np.asarray(ms_resid)[()],
        n=n,
        problems=J,
        ms_seed=np.asarray(ms_seed)[()],
    )


def effective_df(
    terms: list[tuple[np.ndarray, int]],
    level: float = DF_BOUND,
    bounded: tuple[bool, ...] | None = None,
) -> np.ndarray:
    """Degrees of freedom of a variance estimate V = Σ_i t_i, t_i = c_i·MS_i with ν_i df each:
    Satterthwaite's (Σ_i t̃_i)² / Σ_i t̃_i² / ν_i, evaluated with every positive term at its
    upper DF_BOUND confidence bound t̃_i = t_i·ν_i / χ²_{ν_i}(DF_BOUND) (negative terms as is).

    Plain Satterthwaite feeds the df the same noisy mean squares as the variance: a seed mean
    square with 2 df that is small by chance lends V the large df of the problem terms just when V
    is underestimated. With 3 seeds it (and the seed part clipped out of V) left the 95%
    interval of a contrast covering the task truth only 0.91–0.93 of the time at 256–500
    problems, and the Holm marks firing on null arms in up to 14% of studies. At the bound, for
    V = A + B with A on 2 df and B known, the interval covers 0.954–0.978 for every share of A
    and the tests at α = 0.05, 0.05/3 and 0.01 never reject more often than α (0.950–0.964 and
    at most α with 4 df). Terms with ν_i = 0 (one problem:
    no problem term) are left out. `level` is the bound's level and `bounded[i]` says whether
    term i is bounded at all (default: every positive term; `look_df` bounds the seed term
    only)."""
    out = []
    for i, (t, nu) in enumerate(terms):
        nu = np.asarray(nu, dtype=float)  # may be an array (a design grid)
        ok = nu > 0
        safe = np.where(ok, nu, 1.0)
        inflate = safe / sps.chi2.ppf(level, safe) if bounded is None or bounded[i] else 1.0
        out.append((np.where(ok, np.where(t > 0, t * inflate, t), 0.0), safe))
    with np.errstate(invalid="ignore", divide="ignore"):
        weight = sum(t**2 / nu for t, nu in out)
        return sum(t for t, _ in out) ** 2 / weight


def estimate(y: np.ndarray, confidence: float = CONFIDENCE) -> Estimate:
    """An arm's (or a contrast's) task-level mean with its t interval: y [n, J]."""
    c = crossed(y)
    half = float(c.half_width(confidence))
    sd = float(np.sqrt(c.seed_var + c.resid_var / c.problems)) if c.n >= 2 else float("nan")
    return Estimate(float(c.mean), float(c.mean) - half, float(c.mean) + half, c.n, sd)


def eval_noise_var(y: np.ndarray, samples: int) -> np.ndarray:
    """Eval-sampling variance of one run's pass@1 over J problems from y[..., J] (per-problem
    pass rates over `samples` samples): mean_j ŷ(1 − ŷ)/(K − 1), unbiased for p(1 − p)/K, over J."""
    y = np.asarray(y, dtype=float)
    if samples < 2:
        return np.full(y.shape[:-1], np.nan)[()]
    return ((y * (1 - y)).mean(axis=-1) / (samples - 1) / y.shape[-1])[()]


def equivalent(low: np.ndarray, high: np.ndarray, margin: float | None) -> np.ndarray:
    """TOST: the (90%) interval lies inside (−margin, +margin); False without a margin."""
    if margin is None or not margin > 0:
        return np.zeros(np.shape(low), dtype=bool)[()]
    return ((np.asarray(low) > -margin) & (np.asarray(high) < margin))[()]


def look_df(c: Crossed, level: float) -> np.ndarray:
    """Degrees of freedom of a sequential look's t (`stats.sequential`): `effective_df` with the
    seed mean square alone read at its upper `level` confidence bound, the problem pair as is.

    Why not `effective_df`'s default at the looks' small nominal levels (0.0005–0.01): bounding
    MS_problem but not the MS_resid subtracted from it makes a problem term out of noise when
    the arm × problem component is 0, and a seed mean square small by chance then lends V the
    problem terms' df (measured on exact mean-square draws, 3–16 seeds: at 0.001 up to 2.5 times
    the nominal rate with 64 problems and 3.9 with 256, at 0.01 up to 1.3). The danger is the
    seed term's:
    with n − 1 = 2 df, P(MS_seed < x·E) ≈ x, so the bound's level must shrink with the nominal
    level (`sequential.df_level`: then 0.01–1.00 of the nominal rate in the same draws, the
    conservative end at 3 seeds when the problem terms carry the variance). Capping
    at n − 1 df instead is safe but throws away the problem terms' df when they carry the
    variance (0.01–0.2 of the nominal rate at 0.001)."""
    n, J = c.n, c.problems
    keep = (np.asarray(c.problem_var) > 0).astype(float)
    ms_problem = n * np.asarray(c.problem_var) + c.resid_var
    terms = [(c.ms_seed, n - 1), (keep * ms_problem, J - 1)]
    terms.append((-keep * np.asarray(c.resid_var), (n - 1) * (J - 1)))
    return np.asarray(effective_df(terms, level, bounded=(True, False, False)))[()]
