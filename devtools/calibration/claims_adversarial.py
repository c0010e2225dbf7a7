"""The claims' calibration gates on scenarios unlike `task_level`'s default model.

Problem difficulties come from a mixture of Beta distributions (half the problems hard, half
easy: pass rates piled up near 0 and 1, as on real evals, instead of logit-normal); training
outcomes are heavy-tailed (a Student t with 3 df per seed) or normal; the arm × problem
interaction is τ = 0.5 or 1 logit. Problems are drawn afresh for every study, the arms of a seed
share their eval draws (common random numbers), and the task truths are exact up to quadrature
(deterministic quantiles of the mixture × Gauss–Hermite nodes), with each arm's logit shift
solved so that its task truth is what the scenario says. Every study goes through the report's
own functions, as `claims_calibration` and `claims_claim6` run them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special
from scipy import stats as sps

from ablate.report.claims import estimand, rules
from devtools.calibration import claims_calibration as cc
from devtools.calibration import claims_claim6 as c6
from devtools.calibration.gates import Gate, at_most, within
from devtools.calibration.simulate import normal_nodes
from devtools.calibration.task_level import T_DF, mixing_nodes

#: (weight, a, b) of each Beta component of the problems' pass rates: half hard, half easy
MIXTURE = ((0.5, 0.4, 2.5), (0.5, 2.5, 0.4))
CLIP = 1e-6  # pass rates are clipped into [CLIP, 1 − CLIP] before the logit


@dataclass(frozen=True)
class Scenario:
    seeds: int
    problems: int = 64
    samples: int = 8
    tau: float = 1.0  # arm × problem interaction, logit SD (arms 1..)
    heavy: bool = True  # Student t (3 df) training outcomes instead of normal
    sigma: float = 0.3  # logit SD of a run's training outcome
    rho: float = 0.5  # share of the seed variance common to the arms of a seed

    def label(self) -> str:
        seeds = "t3 seeds" if self.heavy else "normal seeds"
        return (
            f"Beta-mixture problems, τ {self.tau:g}, {seeds}, {self.seeds} seeds, "
            f"{self.problems} problems × {self.samples}"
        )


@functools.cache
def difficulty_grid(points: int = 4000) -> np.ndarray:
    """Logits of the mixture's deterministic quantiles: [points] (quadrature over problems)."""
    parts = []
    for weight, a, b in MIXTURE:
        m = round(weight * points)
        parts.append(sps.beta.ppf((np.arange(m) + 0.5) / m, a, b))
    return special.logit(np.clip(np.concatenate(parts), CLIP, 1 - CLIP))


def task_value(scn: Scenario, shift: float, spread: float) -> float:
    """E expit(logit p + shift + spread·z + u) over the problems, z and u: a task truth."""
    x, wx = normal_nodes(40)
    w_nodes, w_weights = mixing_nodes(scn.heavy, 20)
    sd = np.sqrt(spread**2 + scn.sigma**2 * w_nodes)  # [m]
    grid = difficulty_grid()[:, None, None] + shift + sd[None, :, None] * x  # [P, m, 40]
    return float((special.expit(grid).mean(axis=0) @ wx) @ w_weights)


def shifts(scn: Scenario, effects: tuple[float, ...]) -> np.ndarray:
    """Per-arm logit shifts [A] so that task truth_a − truth_0 = effects[a] (arm 0: no τ)."""
    return np.array([0.0, *(_shift(scn, e) for e in effects[1:])])


@functools.cache
def _shift(scn: Scenario, effect: float) -> float:
    """The logit shift of an arm with interaction τ whose task truth is arm 0's + effect."""
    base = task_value(scn, 0.0, 0.0)
    gap = lambda d: task_value(scn, d, scn.tau) - base - effect  # noqa: E731
    return optimize.brentq(gap, -20.0, 20.0, xtol=1e-12)


def draw(scn: Scenario, shift: np.ndarray, studies: int, rng: np.random.Generator) -> np.ndarray:
    """y [S, A, n, J]: per-(run, problem) pass rates over `samples` shared eval draws."""
    arms, n, j, k = len(shift), scn.seeds, scn.problems, scn.samples
    comp = rng.choice(len(MIXTURE), size=(studies, 1, j), p=[w for w, _, _ in MIXTURE])
    a = np.array([c[1] for c in MIXTURE])[comp]
    b = np.array([c[2] for c in MIXTURE])[comp]
    logits = special.logit(np.clip(rng.beta(a, b), CLIP, 1 - CLIP))  # [S, 1, J]
    spread = np.r_[0.0, np.full(arms - 1, scn.tau)][:, None]  # [A, 1]
    logits = logits + shift[:, None] + spread * rng.standard_normal((studies, arms, j))
    u = np.sqrt(scn.rho) * rng.standard_normal((studies, 1, n))
    u = scn.sigma * (u + np.sqrt(1 - scn.rho) * rng.standard_normal((studies, arms, n)))
    if scn.heavy:
        u = u / np.sqrt(rng.chisquare(T_DF, (studies, 1, n)))
    p = special.expit(logits[:, :, None, :] + u[..., None])  # [S, A, n, J]
    draws = rng.random((studies, 1, n, j, k))
    return np.count_nonzero(draws < p[..., None], axis=-1) / k


def _rate(hits: list[float]) -> float:
    h = np.asarray(hits, dtype=float)
    return float(np.nanmean(h)) if np.isfinite(h).any() else float("nan")


def null_gates(scn: Scenario, studies: int, rng) -> list[Gate]:
    """False positives and coverage of the claims in null studies (4 arms, equal truths)."""
    y = draw(scn, shifts(scn, (0.0, 0.0, 0.0, 0.0)), studies, rng)
    hits = [cc.null_hits(one[1:] - one[:1], np.zeros(3)) for one in y]
    fp = _rate([h["fp_new"][0] for h in hits])
    cov = _rate([np.nanmean(h["cov_new"]) for h in hits])
    return [
        at_most(f"claims: false positives, {scn.label()}", fp, 0.05, studies),
        within(f"claims: 95% coverage, {scn.label()}", cov, 0.93, 0.97, studies),
    ]


def margin_gate(scn: Scenario, studies: int, rng, margin: float = cc.MARGIN) -> Gate:
    """P(equivalent) of claims of no effect whose true Δ is ±margin."""
    y = draw(scn, shifts(scn, (0.0, margin, -margin)), studies, rng)
    eq = _rate([np.mean(cc.margin_hits(one[1:] - one[:1], margin)["eq_new"]) for one in y])
    return at_most(f"claims: P(equivalent | Δ = ±{margin:g}), {scn.label()}", eq, 0.05, studies)


def claim6_gates(scn: Scenario, studies: int, rng) -> list[Gate]:
    """Claim 6 with no effect at τ = 0 (base and RL arm alike: truth exactly 0): P(supported),
    one-sided, and the coverage of its interval."""
    y = draw(scn, np.zeros(2), studies, rng)
    supported, covered = [], []
    for one in y:
        v, _ = c6.study_values(one)
        c = rules.adjudicate([estimand.task_claim(c6._claim(), v)])[0]
        supported.append(c.verdict == rules.SUPPORTED)
        covered.append(float(c.low <= 0 <= c.high) if np.isfinite(c.low) else np.nan)
    name = f"claim 6 (pass@{c6.K}), no effect, {scn.label()}"
    return [
        at_most(f"{name}: P(supported)", _rate(supported), 0.025, studies),
        within(f"{name}: 95% coverage", _rate(covered), 0.93, 0.97, studies),
    ]


def adversarial_gates(studies: int, seed: int = 0) -> list[Gate]:
    """The claims' gates on Beta-mixture problems, heavy-tailed seeds and τ up to 1 (module
    docstring); `studies` studies per gate (200 run in well under a minute on one core)."""
    rng = np.random.default_rng([seed, 42])
    hard = Scenario(seeds=10, problems=64, tau=1.0, heavy=True)
    wide = Scenario(seeds=10, problems=256, tau=0.5, heavy=False)
    few = Scenario(seeds=5, problems=64, tau=1.0, heavy=True)
    six = Scenario(seeds=10, problems=64, samples=c6.SAMPLES, tau=0.0, heavy=True)
    return [
        *null_gates(hard, studies, rng),
        *null_gates(wide, studies, rng),
        margin_gate(few, studies, rng),
        *claim6_gates(six, studies, rng),
    ]
