"""Divergence as its own outcome (`ablate.report.stats.divergence`), checked on whole studies
(`devtools.calibration.task_level`: fresh problems, τ = 0.5, binomial eval samples) in which
runs diverge: each of the 3 compared arms at rate q against a reference that never diverges
("in one arm": every contrast has divergence on one side), or every arm at q (the exact test's
size). The survivors' means differ by `EFFECTS` (0 and ±0.03).

Rates (a study is the unit: its contrasts averaged first; target in brackets):
- survivors' Δ: the crossed 95% interval on the seeds where both arms survived holds the
  survivors' truth μ_a − μ_r [0.95];
- hurdle Δ: `divergence.hurdle`'s interval holds (1 − q_a)μ_a − (1 − q_r)μ_r [0.95];
- zeros: the old reading (crossed on differences with a diverged run as 0 everywhere) holds the
  same hurdle truth, for comparison;
- divergence test: Boschloo's exact test (`outcomes.exact_p`) rejects at 0.05 [≤ 0.05 when the
  rates are equal; its power otherwise].
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ablate.report.stats import crossed, divergence, outcomes
from devtools.calibration.gates import Gate, at_least, at_most, within
from devtools.calibration.task_calibration import task_rate
from devtools.calibration.task_level import TaskModel, simulate_task

EFFECTS = (0.0, 0.03, 0.0, -0.03)
MODEL = TaskModel(arms=4, seeds=10, problems=64, interaction=0.5, effects=EFFECTS)
MODEL = replace(MODEL, survivor_effects=True)
#: label -> (q of the reference, q of each compared arm)
SCENARIOS = {
    "q 0.1 in one arm": (0.0, 0.1),
    "q 0.2 in one arm": (0.0, 0.2),
    "q 0.1 in both arms": (0.1, 0.1),
    "q 0.2 in both arms": (0.2, 0.2),
}
COLUMNS = (
    ("survivors", "survivors' Δ cov"),
    ("hurdle", "hurdle Δ cov"),
    ("zeros", "Δ cov, diverged as 0"),
    ("test", "P(divergence test rejects)"),
    ("pairs", "seeds both survived"),
)


def model_for(q_ref: float, q_arm: float, seeds: int, base: TaskModel = MODEL) -> TaskModel:
    return replace(base, seeds=seeds, divergence=(q_ref, *(q_arm,) * (base.arms - 1)))


def _survivors(d: np.ndarray, both: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Crossed mean, SE and df of d [S, n, J] over the rows where `both` [S, n]: NaN below 3."""
    mean, se, df = (np.full(len(d), np.nan) for _ in range(3))
    count = both.sum(axis=1)
    order = np.argsort(~both, axis=1, kind="stable")  # surviving rows first
    for m in np.unique(count[count >= 3]):
        sel = np.flatnonzero(count == m)
        rows = d[sel[:, None], order[sel, :m]]  # [s, m, J]
        c = crossed.crossed(rows)
        mean[sel], se[sel], df[sel] = c.mean, c.se, c.df
    return mean, se, df


def _arm_means(y: np.ndarray, alive: np.ndarray) -> np.ndarray:
    """Survivors' mean of y [S, n, J] over the alive [S, n] rows: [S] (NaN: none alive)."""
    with np.errstate(invalid="ignore"):
        return (y.mean(axis=-1) * alive).sum(axis=1) / alive.sum(axis=1)


def contrast_hits(y, alive, truth, survivors, a: int) -> dict:
    """Per-study hits of contrast a − 0: y [S, A, n, J], alive [S, A, n], truths [A]."""
    d, both = (y[:, a] - y[:, 0]).astype(float), alive[:, a] & alive[:, 0]
    mean, se, df = _survivors(d, both)
    with np.errstate(invalid="ignore"):
        half = crossed.sps.t.ppf(0.975, df) * se
    hit = np.where(np.isfinite(half), np.abs(mean - (survivors[a] - survivors[0])) <= half, np.nan)
    n = y.shape[2]
    k_a, k_r = (~alive[:, a]).sum(axis=1), (~alive[:, 0]).sum(axis=1)
    mu_a, mu_r = _arm_means(y[:, a], alive[:, a]), _arm_means(y[:, 0], alive[:, 0])
    value, h_half = divergence.hurdle(mu_a, mu_r, k_a, n, k_r, n, se, df)
    combined = truth[a] - truth[0]
    hurdle = np.where(np.isfinite(h_half), np.abs(value - combined) <= h_half, np.nan)
    zero = crossed.crossed(d)
    zeros = np.abs(zero.mean - combined) <= zero.half_width()
    test = [outcomes.exact_p(int(x), n, int(r), n) < 0.05 for x, r in zip(k_a, k_r, strict=True)]
    out = {"survivors": hit, "hurdle": hurdle, "zeros": zeros.astype(float)}
    return out | {"test": np.array(test, dtype=float), "pairs": both.sum(axis=1).astype(float)}


def calibrate(model: TaskModel, studies: int, seed: int = 0) -> dict:
    """{rate: (value, MC SE)} over `studies` studies of `model` (study = unit)."""
    s = simulate_task(model, studies, np.random.default_rng(seed), fixed=False)
    hits = [contrast_hits(s.y, s.alive, s.truth, s.survivors, a) for a in range(1, model.arms)]
    return {k: task_rate(np.stack([h[k] for h in hits], axis=1)) for k in hits[0]}


def table(studies: int = 1000, seeds=(5, 10), seed: int = 0) -> list[tuple[str, int, dict]]:
    rows = []
    for i, (label, (q_ref, q_arm)) in enumerate(SCENARIOS.items()):
        for j, n in enumerate(seeds):
            rows.append(
                (label, n, calibrate(model_for(q_ref, q_arm, n), studies, seed + 10 * i + j))
            )
    return rows


def format_table(rows) -> str:
    head = ["scenario", "n", *(h for _, h in COLUMNS), "MC error"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, n, rates in rows:
        errors = max(se for k, (_, se) in rates.items() if k != "pairs")
        cells = [label, str(n), *(f"{rates[k][0]:.3f}" for k, _ in COLUMNS[:-1])]
        cells += [f"{rates['pairs'][0]:.1f}", f"{errors:.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def adversarial_gates(studies: int, seed: int = 0) -> list[Gate]:
    """Divergence in one arm (q = 0.2 at 10 seeds, q = 0.1 at 5): the survivors' Δ interval
    covers 0.93–0.97; equal rates (q = 0.2 in both arms, 10 seeds): the exact test rejects at
    most 5%; and the zeros' interval, the reading this replaces, is shown to miss."""
    one = calibrate(model_for(0.0, 0.2, 10), studies, seed)
    small = calibrate(model_for(0.0, 0.1, 5), studies, seed + 1)
    both = calibrate(model_for(0.2, 0.2, 10), studies, seed + 2)
    return [
        within("divergence: survivors' Δ coverage, q 0.2 in one arm, 10 seeds",
               one["survivors"][0], 0.93, 0.97, studies),
        within("divergence: survivors' Δ coverage, q 0.1 in one arm, 5 seeds",
               small["survivors"][0], 0.93, 0.97, studies),
        at_least("divergence: hurdle Δ coverage, q 0.2 in one arm, 10 seeds",
                 one["hurdle"][0], 0.93, studies),
        at_most("divergence: exact test's size, q 0.2 in both arms, 10 seeds",
                both["test"][0], 0.05, studies),
        at_most("divergence: the zeros' Δ coverage, q 0.1 in one arm, 5 seeds (the old reading "
                "misses)", small["zeros"][0], 0.90, studies),
    ]  # fmt: skip


LEGEND = """\
Divergence at rate q in each compared arm (one arm of each contrast) or in every arm, τ = 0.5,
64 problems, survivors' means differing by 0 and ±0.03; study = unit. survivors' Δ cov: the
crossed 95% interval on the seeds both arms survived holds μ_a − μ_r [0.93–0.97]; hurdle Δ cov:
the delta-method interval holds (1 − q_a)μ_a − (1 − q_r)μ_r [≥ 0.95]; Δ cov, diverged as 0: the
old reading against the same hurdle truth; P(divergence test rejects): Boschloo at 0.05, its
size where the rates are equal [≤ 0.05], its power where one arm diverges."""
