"""`ablate plan` against the truth: pilots drawn problem by problem from a known model, the plan's
recommendation from each, and the power that design really has, studies of it drawn afresh.

The model (two arms, the reference and one arm; per study, problems afresh):

- problems: logits of a logit-normal (`base_pass`, `problem_sd`) or of a Beta mixture
  (`beta_mixture`: (weight, a, b) components: many problems near 0 and 1, few in between);
- interaction: the arm adds τ·z_j to problem j's logit, z ~ N(0, 1) (`interaction` = τ);
- training: run (a, s) shifts every logit by u_{a,s} = σ·(√ρ·c_s + √(1 − ρ)·e_{a,s})
  (`seed_sd` σ on the logit scale, `shared` ρ);
- effect: the arm's logit shift δ is solved so that the task truths differ by `effect`;
- eval: K samples per problem; sample k of run (a, s) on problem j is correct iff U < p, U the
  seed's shared draw for (s, j, k) with probability `coupling` and the run's own otherwise
  (coupling 1: common random numbers, the arms of a seed drawing alike; 0: independent evals).

`plan_row` draws one pilot, plans from it twice (the difference's eval noise from the paired
per-sample outcomes, and the sum of the arms' as before) and returns, per plan, its design, the
power it promises and simulates (`ablate.report.stats.plan_power`), and the power that design
has under the model. `adversarial_gates` averages the realised power over many pilots.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np
from scipy import optimize, special
from scipy import stats as sps

from ablate.report.stats import design, plan_power
from ablate.report.stats.crossed import crossed
from ablate.report.stats.design import Components, Cost, Design
from devtools.calibration.gates import Gate, at_least, within
from devtools.calibration.simulate import normal_nodes

#: the quickstart's trial at the defaults of `ablate plan`: 50 steps × 0.58 s, 4 evals, 2 arms
COST = Cost(train_seconds=29.0, eval_sample_seconds=0.0024, evals=4, trials_per_seed=2)
PROBLEMS = (64, 128, 256, 512, 1024, 2048, 4096)  # a procedural task: as many as wanted
BUDGET_HOURS = 1e6  # the cheapest design reaching the effect, whatever it costs
ALPHA = 0.05  # one contrast
CHUNK = 2**22  # simulated (study, seed, problem) cells held at once


@dataclass(frozen=True)
class Truth:
    name: str
    base_pass: float = 0.5
    problem_sd: float = 1.5
    beta_mixture: tuple[tuple[float, float, float], ...] = ()
    seed_sd: float = 0.15  # σ, logit scale
    shared: float = 0.5  # ρ
    interaction: float = 0.0  # τ, logit scale
    coupling: float = 1.0
    effect: float = 0.03
    pilot: tuple[int, int, int] = (4, 256, 4)  # seeds, problems, samples


def _logits(t: Truth, rng: np.random.Generator, size) -> np.ndarray:
    if not t.beta_mixture:
        return special.logit(t.base_pass) + t.problem_sd * rng.standard_normal(size)
    w, a, b = (np.array(x) for x in zip(*t.beta_mixture, strict=True))
    which = rng.choice(len(w), size=size, p=w / w.sum())
    p = np.clip(rng.beta(a[which], b[which]), 1e-6, 1 - 1e-6)
    return special.logit(p)


@functools.cache
def _quantile_logits(t: Truth, m: int = 4000) -> tuple[np.ndarray, np.ndarray]:
    """A deterministic grid of problem logits with weights, for the task truth."""
    q = (np.arange(m) + 0.5) / m
    if not t.beta_mixture:
        return special.logit(t.base_pass) + t.problem_sd * sps.norm.ppf(q), np.full(m, 1 / m)
    parts = [
        (special.logit(np.clip(sps.beta.ppf(q, a, b), 1e-9, 1 - 1e-9)), w)
        for w, a, b in t.beta_mixture
    ]
    total = sum(w for _, w in parts)
    return np.concatenate([x for x, _ in parts]), np.concatenate(
        [np.full(m, w / total / m) for _, w in parts]
    )


def _task_mean(t: Truth, shift: float, spread: float) -> float:
    x, wx = normal_nodes(60)
    logits, w = _quantile_logits(t)
    sd = np.hypot(spread, t.seed_sd)
    return float(w @ (special.expit(logits[:, None] + shift + sd * x) @ wx))


@functools.cache
def shift_for(t: Truth) -> float:
    """The arm's logit shift δ: its task truth is the reference's plus `effect`."""
    target = _task_mean(t, 0.0, 0.0) + t.effect
    return optimize.brentq(lambda d: _task_mean(t, d, t.interaction) - target, -20, 20, xtol=1e-12)


def draw(t: Truth, studies: int, n: int, J: int, K: int, rng, draws: bool = False):
    """Pass rates (arm [S, n, J], ref [S, n, J]) and, with `draws`, the per-sample outcomes
    [S, n, J, K] of each arm."""
    shift = shift_for(t)
    base = _logits(t, rng, (studies, 1, J))
    z = t.interaction * rng.standard_normal((studies, 1, J))
    c = np.sqrt(t.shared) * rng.standard_normal((studies, n, 1))
    u = [
        t.seed_sd * (c + np.sqrt(1 - t.shared) * rng.standard_normal((studies, n, 1)))
        for _ in range(2)
    ]
    p = [special.expit(base + shift + z + u[0]), special.expit(base + u[1])]
    counts, outcomes = [np.zeros((studies, n, J)) for _ in range(2)], ([], [])
    for _ in range(K):
        shared = rng.random((studies, n, J))
        for i in range(2):
            own = rng.random((studies, n, J))
            x = np.where(rng.random((studies, n, J)) < t.coupling, shared, own) < p[i]
            counts[i] += x
            if draws:
                outcomes[i].append(x)
    rates = (counts[0] / K, counts[1] / K)
    if not draws:
        return rates
    return rates, (np.stack(outcomes[0], -1), np.stack(outcomes[1], -1))


def realised_power(t: Truth, d: Design, studies: int, rng) -> tuple[float, float]:
    """(share of `studies` fresh studies of design d rejecting at ALPHA, variance of Δ̂)."""
    chunk = max(1, CHUNK // (d.seeds * d.problems))
    p_values, deltas = [], []
    for start in range(0, studies, chunk):
        m = min(chunk, studies - start)
        arm, ref = draw(t, m, d.seeds, d.problems, d.samples, rng)
        c = crossed(arm - ref)
        p_values.append(np.atleast_1d(c.p_value()))
        deltas.append(np.atleast_1d(c.mean))
    p, delta = np.concatenate(p_values), np.concatenate(deltas)
    return float(np.mean(p < ALPHA)), float(np.var(delta, ddof=1))


def pilot_components(t: Truth, rng, shape=None) -> tuple[Components, Components]:
    """One pilot's components: (v of the difference, from the paired draws; v as the sum)."""
    n, J, K = shape or t.pilot
    (arm, ref), (da, dr) = draw(t, 1, n, J, K, rng, draws=True)
    paired = design.contrast_components(arm[0], ref[0], K, (da[0], dr[0]))
    summed = design.contrast_components(arm[0], ref[0], K)
    return paired, summed


ORACLE = (200, 4096, 4)  # a pilot so large its components are the truth's (no seed bound)


def oracle_components(t: Truth, seed: int = 0) -> tuple[Components, Components]:
    """The truth's components, both rules, read from an ORACLE-sized pilot and used as they
    are (n = 0: no upper bound), so a design's realised power tests only the variance formula."""
    rng = np.random.default_rng(seed)
    return tuple(replace(c, n=0) for c in pilot_components(t, rng, ORACLE))


def recommend(c: Components, effect: float) -> Design:
    """`design.recommend` over `design.designs` (the plan's own search)."""
    grid = design.designs([c], COST, ALPHA, PROBLEMS)
    return design.recommend(grid, effect, BUDGET_HOURS)


def recommend_fast(c: Components, effect: float) -> Design:
    """The same design as `recommend` when one reaches the effect: the cheapest whose power
    at the effect (one noncentral t per design, instead of `mde`'s bisection) is 0.8."""
    n, J, K = (
        a.ravel() for a in np.meshgrid(design.SEEDS, PROBLEMS, design.SAMPLES, indexing="ij")
    )
    power = design.design_power(design.at_upper_bound(c), n, J, K, effect, ALPHA)
    hours = COST.hours(n, J, K)
    i = np.flatnonzero(power >= design.POWER)
    i = i[np.lexsort((-power[i], hours[i]))[0]] if i.size else int(np.argmax(power))
    return Design(int(n[i]), int(J[i]), int(K[i]), float(hours[i]), float("nan"))


def _shape(d: Design) -> tuple[int, int, int]:
    return d.seeds, d.problems, d.samples


@dataclass(frozen=True)
class PlanRow:
    truth: str
    rule: str  # "paired (CRN)" or "summed"
    design: Design  # from a 4-seed pilot
    promised: float  # the plan's formula at its components (seed term at its bound)
    simulated: float  # the plan's simulation from the same components
    oracle: Design  # from the truth's components
    expected: float  # its power by the formula at the truth's components
    realised: float  # its power under the truth
    var_ratio: float  # its Var(Δ̂) by the rule's formula / realised


def plan_rows(t: Truth, studies: int, seed: int = 0) -> list[PlanRow]:
    """One pilot of `t` and the truth's components, each planned by both rules; the pilot's
    designs checked by the plan's simulation, the truth's by `studies` fresh studies."""
    rng = np.random.default_rng(seed)
    rows = []
    pilot, oracle = pilot_components(t, rng), oracle_components(t, seed + 1)
    for rule, c, truth_c in zip(("paired (CRN)", "summed"), pilot, oracle, strict=True):
        d = recommend(c, t.effect)
        check = plan_power.check(t.name, "contrast", c, d, t.effect, ALPHA, studies)
        best = recommend(truth_c, t.effect)
        realised, var = realised_power(t, best, studies, rng)
        predicted = float(design.design_variance(truth_c, *_shape(best)))
        expected = float(design.design_power(truth_c, *_shape(best), t.effect, ALPHA))
        ratio = predicted / var
        rows.append(
            PlanRow(t.name, rule, d, check.power, check.simulated, best, expected, realised, ratio)
        )
    return rows


#: Three pilots of different shape (the issue's done-when), 4 seeds × 256 problems × 4 samples.
SHAPES = (
    Truth("seed-dominated", seed_sd=0.15, shared=0.3, problem_sd=1.5, effect=0.04),
    Truth("interaction-dominated", seed_sd=0.05, interaction=1.0, problem_sd=1.0, effect=0.04),
    Truth("eval-noise-dominated", seed_sd=0.04, coupling=0.5, problem_sd=0.5, effect=0.02),
)
#: Unlike the default model: a Beta mixture of difficulties; τ = 1 with partial coupling.
ADVERSARIAL = (
    Truth(
        "Beta-mixture difficulties",
        beta_mixture=((0.5, 0.4, 3.0), (0.5, 3.0, 0.4)),
        seed_sd=0.2,
        interaction=0.5,
        effect=0.03,
        pilot=(8, 512, 4),
    ),
    Truth(
        "interaction τ = 1",
        seed_sd=0.1,
        interaction=1.0,
        coupling=0.7,
        effect=0.04,
        pilot=(8, 512, 4),
    ),
)


def average_power(t: Truth, pilots: int, seed: int) -> float:
    """The plan's realised power averaged over `pilots` pilots: each pilot planned (paired
    rule), one fresh study of its design drawn and tested."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(pilots):
        paired, _ = pilot_components(t, rng)
        d = recommend_fast(paired, t.effect)
        arm, ref = draw(t, 1, d.seeds, d.problems, d.samples, rng)
        hits += int(crossed(arm - ref).p_value()[0] < ALPHA)
    return hits / pilots


#: realised − formula power at the truth's components: −0.01 to +0.04 on SHAPES and ADVERSARIAL
#: (2000 studies each; the formula's bounded df is a little conservative); summing the arms' eval
#: noise instead overshoots by +0.06 to +0.15
BELOW, ABOVE = 0.05, 0.07


def truth_gate(t: Truth, studies: int, seed: int, rule: int = 0) -> Gate:
    """The design recommended from the truth's own components (`rule` 0: the difference's eval
    noise; 1: the arms' summed) has the power the formula gives it, within [−BELOW, +ABOVE]."""
    truth_c = oracle_components(t, seed)[rule]
    best = recommend_fast(truth_c, t.effect)
    expected = float(design.design_power(truth_c, *_shape(best), t.effect, ALPHA))
    realised, _ = realised_power(t, best, studies, np.random.default_rng(seed))
    name = f"plan: realised power at the truth's components (formula {expected:.3f}), {t.name}"
    return within(name, realised, expected - BELOW, expected + ABOVE, studies)


def adversarial_gates(studies: int, seed: int = 0) -> list[Gate]:
    """The plan's power at its recommendation on pilots unlike the default model:
    - from the truth's own components, the recommended design's realised power is the formula's
      (summing the arms' eval noise, the old rule, overshoots it: 0.97 against 0.83 on the
      Beta mixture);
    - the plan's simulation at an 8-seed pilot's recommendation finds the 0.8 it promises;
    - averaged over `studies` 8-seed pilots (one fresh study each) it is at least 0.8 (the seed
      term at its upper bound makes it conservative)."""
    gates = []
    for i, t in enumerate(ADVERSARIAL):
        gates.append(truth_gate(t, studies, seed + i))
        paired, _ = pilot_components(t, np.random.default_rng(seed + 100 + i))
        d = recommend_fast(paired, t.effect)
        sim = plan_power.check(t.name, "contrast", paired, d, t.effect, ALPHA, studies).simulated
        name = f"plan: its simulated power, 8-seed pilot, {t.name}"
        gates.append(within(name, sim, 0.78, 0.85, studies))
        average = average_power(t, studies, seed + 10 + i)
        gates.append(at_least(f"plan: realised power over pilots, {t.name}", average, 0.8, studies))
    return gates


def shares(c: Components, n: int, J: int, K: int) -> str:
    """How Var(Δ̂) splits at (n, J, K): seeds / arm × problem / seed × problem + eval."""
    parts = np.array([c.seed_var / n, c.problem_var / J, (c.sp_var + c.sample_var / K) / (n * J)])
    return " / ".join(f"{x:.0%}" for x in parts / parts.sum())


def main(argv: list[str] | None = None) -> int:
    """`python -m devtools plan-calibration [--studies N] [--seed S] [--gates]`."""
    import argparse
    import time

    p = argparse.ArgumentParser(prog="python -m devtools plan-calibration", description=__doc__)
    p.add_argument("--studies", type=int, default=2000, help="simulated studies per power")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gates", action="store_true", help="also the adversarial gates")
    args = p.parse_args(argv)
    print("shape (Var split seed / arm×problem / rest at the pilot) | rule | from a 4-seed pilot:")
    print("  design n×J×K, power promised, simulated | from the truth: design, formula, realised, ")
    print("  Var(Δ̂) by the rule's formula / realised")
    for t in SHAPES:
        start = time.perf_counter()
        split = shares(oracle_components(t, args.seed + 1)[0], *t.pilot)
        for r in plan_rows(t, args.studies, args.seed):
            d, o = r.design, r.oracle
            print(
                f"{t.name} ({split}) | {r.rule} | {d.seeds}×{d.problems}×{d.samples}, "
                f"{r.promised:.3f}, {r.simulated:.3f} | {o.seeds}×{o.problems}×{o.samples}, "
                f"{r.expected:.3f}, {r.realised:.3f}, {r.var_ratio:.2f}"
            )
        print(f"  ({time.perf_counter() - start:.1f} s)")
    if args.gates:
        gates = adversarial_gates(args.studies, args.seed)
        for g in gates:
            print(g.line())
        return 0 if all(g.passed for g in gates) else 1
    return 0
