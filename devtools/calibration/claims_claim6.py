"""Claim 6 ("RL raises pass@1 more than pass@k at large k") calibrated on fresh-problem studies.

A study of `task_level` with two arms: arm 0 plays the base model's eval (step 0), arm 1 the RL
arm's final eval, K = 16 samples per problem, k = 8. Each study goes through the report's own
functions: per-problem pass@k by `claims.estimand.pass_at_k`, the headroom statistic linearised
by `claims.headroom.linearised`, the crossed contrast by `estimand.task_claim`, the verdict by
`rules.adjudicate`. The truth is the task's: T = share(pass@1) − share(pass@k), each share
(P_final − P_base) / (1 − P_base) of the task expectations (Gauss–Hermite, as `task_level`
computes its truths). The old rule beside it: raw gain(pass@1) − gain(pass@k) per seed, paired t
over seeds, against its own truth (the raw difference of the task expectations).

Scenarios: no effect (arm 1 = arm 0 but for the interaction τ; at τ = 0 the truth is exactly 0)
and a uniform gain (arm 1 shifted in logit so that its task pass@1 is +0.1: RL that improves
every problem alike, where pass@k at this base has less room to gain in raw terms).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from scipy import special

from ablate.report.claims import estimand, headroom, rules
from ablate.report.stats import inference
from devtools.calibration.calibration import study_rate
from devtools.calibration.simulate import normal_nodes
from devtools.calibration.task_level import TaskModel, mixing_nodes, simulate_task, task_truth

K, SAMPLES = 8, 16
EFFECTS = (0.0, 0.1)
CASES = dict(effects=EFFECTS, taus=(0.0, 1.0), problems=(64, 256), seeds=(5, 10))


def task_pass_at(model: TaskModel, shift: float, spread: float, sigma: float, k: int) -> float:
    """E[1 − (1 − p)^k] over the task's problems, seeds and interaction (p = pass rate)."""
    x, wx = normal_nodes(200)
    w_nodes, w_weights = mixing_nodes(model.heavy_tails)
    sd = np.sqrt(model.problem_sd**2 + spread**2 + sigma**2 * w_nodes)  # [m]
    p = special.expit(special.logit(model.base_pass) + shift + sd[:, None] * x)  # [m, 200]
    return float(w_weights @ ((1 - (1 - p) ** k) @ wx))


def truths(model: TaskModel) -> tuple[float, float]:
    """(T on the headroom-share scale, the raw difference of gains) for arm 1 vs arm 0."""
    sigma = model.sigma
    shift, _ = task_truth(model, sigma)
    p1, pk = (
        [task_pass_at(model, shift[a], model.spreads[a], sigma, k) for a in (0, 1)] for k in (1, K)
    )
    share = headroom.headroom_share
    return float(share(p1[1], p1[0]) - share(pk[1], pk[0])), (p1[1] - p1[0]) - (pk[1] - pk[0])


def study_values(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One study's y [2, n, J] (base, final pass rates over SAMPLES): the claim's linearised
    values [n, J] and the old rule's raw per-seed differences of gains [n]."""
    counts = np.rint(y * SAMPLES)
    b1, f1 = y
    bk, fk = (estimand.pass_at_k(c, SAMPLES, K) for c in counts)
    raw = (f1.mean(1) - b1.mean(1)) - (fk.mean(1) - bk.mean(1))
    return headroom.linearised(f1, b1, fk, bk), raw


def _claim() -> rules.Claim:
    return rules.Claim("6", "RL raises pass@1 more than pass@k", f"share gap, pass@{K}")


def study_hits(y: np.ndarray, truth: float, raw_truth: float) -> dict[str, float]:
    """Per-study hits of claim 6, new and old rule."""
    v, raw = study_values(y)
    new = rules.adjudicate([estimand.task_claim(_claim(), v)])[0]
    c = inference.paired_contrast(raw, np.zeros_like(raw))
    old = rules.adjudicate([rules.tested(_claim(), c.diff, c.p_value)])[0]
    out = {}
    for name, claim, t in (("new", new, truth), ("old", old, raw_truth)):
        out[f"supported_{name}"] = float(claim.verdict == rules.SUPPORTED)
        ok = np.isfinite(claim.low) and np.isfinite(claim.high)
        out[f"cov_{name}"] = float(claim.low <= t <= claim.high) if ok else float("nan")
    return out


def calibrate_row(model: TaskModel, studies: int, seed: int = 0) -> tuple[tuple, dict]:
    """((T, raw truth), {rate: (value, MC SE)}) of one scenario (model: 2 arms)."""
    truth, raw_truth = truths(model)
    y = simulate_task(model, studies, np.random.default_rng(seed), fixed=False).y.astype(float)
    hits = [study_hits(one, truth, raw_truth) for one in y]
    rates = {k: study_rate(np.array([h[k] for h in hits])) for k in hits[0]}
    return (truth, raw_truth), rates


def cases(base: TaskModel, effects=EFFECTS, taus=(0.0, 1.0), problems=(64, 256), seeds=(5, 10)):
    """(label, model) over effect × τ × J × n, two arms, SAMPLES samples per problem."""
    base = replace(base, arms=2, samples=SAMPLES)
    return [
        (
            (f"{e:+g}", f"{tau:g}", str(j), str(n)),
            replace(base, interaction=tau, problems=j, seeds=n, effects=(0.0, e)),
        )
        for e in effects
        for tau in taus
        for j in problems
        for n in seeds
    ]


def run(case_list: list, studies: int, seed: int = 0) -> list:
    out = []
    for i, (label, model) in enumerate(case_list):
        (truth, raw), rates = calibrate_row(model, studies, seed + i)
        out.append(((*label, f"{truth:+.3f}", f"{raw:+.3f}"), rates))
    return out


HEADERS = ("Δ pass@1", "τ", "J", "n", "truth T", "truth raw")
COLUMNS = (
    ("supported_new", "P(supported)"),
    ("cov_new", "cov"),
    ("supported_old", "P(supported) old"),
    ("cov_old", "cov old"),
)
LEGEND = f"""\
Claim 6 (k = {K} from {SAMPLES} samples per problem): arm 0 the base eval, arm 1 the RL arm.
  Δ pass@1      the RL arm's task-level pass@1 gain (0: none; +0.1: a uniform logit shift)
  truth T       share(pass@1) − share(pass@{K}) of the task expectations (the claim's estimand)
  truth raw     gain(pass@1) − gain(pass@{K}), raw (the old statistic's)
  P(supported)  the report's rule says supported [≤ 0.025 where truth T ≤ 0: one-sided]
  cov           the 95% interval holds truth T [0.95]; old: the seed t's holds truth raw"""
