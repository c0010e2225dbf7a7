"""Calibration of the sequential design (`ablate.report.stats.sequential`): simulated studies run
through the very replay `ablate run --until-decided` and the report use. This is the quick
normal model of the test suite; the whole-study table (fresh problems, binomial evals, the old
rule beside the new, `calibrate --sequential`) is `devtools.calibration.sequential_task`.

Why: the boundaries are exact for a z statistic with known variance; the report's statistic is
a task-level t with few (Satterthwaite) df at early looks, so the promises — family-wise error
<= alpha over looks and contrasts, P(equivalent | Δ = ±margin) <= 0.05 — are checked here, with
the naive "test again at 0.05 at every look" beside them to show the check can fail.

Generator (pass scale): arm a of seed s on problem j scores
    y[a, s, j] = Δ_a + σ_seed·(√ρ·c_s + √(1−ρ)·e_{a,s}) + σ_int·b_{a,j} + σ_res·ε_{a,s,j}
with c, e, b, ε standard normal, arm 0 the reference (Δ_0 = 0): c_s is the part of a seed's luck
the arms share (same data order), b the arm × problem interaction (drawn once per study: the
problems are a sample of the task), ε the seed × problem and eval noise. The contrast of arm a is
d_a = y_a − y_0 on the same seeds and problems (common random numbers); the problems' own
difficulty cancels in d and is left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ablate.report.stats.sequential import SPENDING, stopping_looks

LOOKS = (3, 5, 8, 12, 16)
ALPHA = 0.05
CHUNK = 500  # simulated studies per array


@dataclass(frozen=True)
class SequentialModel:
    """One simulated study design; `effects[a]` is the true Δ of compared arm a."""

    effects: tuple[float, ...] = (0.0, 0.0, 0.0)
    problems: int = 64
    seed_sd: float = 0.03
    shared_fraction: float = 0.5
    interaction_sd: float = 0.05
    resid_sd: float = 0.3


def simulate(model: SequentialModel, studies: int, seeds: int, rng) -> np.ndarray:
    """Per-(seed, problem) differences d[studies, m, seeds, J] of the m compared arms."""
    arms, J = len(model.effects) + 1, model.problems
    shared = rng.standard_normal((studies, 1, seeds, 1))
    own = rng.standard_normal((studies, arms, seeds, 1))
    seed_term = model.seed_sd * (
        np.sqrt(model.shared_fraction) * shared + np.sqrt(1 - model.shared_fraction) * own
    )
    interaction = model.interaction_sd * rng.standard_normal((studies, arms, 1, J))
    y = seed_term + interaction + model.resid_sd * rng.standard_normal((studies, arms, seeds, J))
    effects = np.array([0.0, *model.effects])[None, :, None, None]
    y = y + effects  # [studies, arms, seeds, J]
    return y[:, 1:] - y[:, :1]


@dataclass(frozen=True)
class Outcome:
    """Rates over simulated studies (per contrast unless `family` says so)."""

    family_error: float  # P(any contrast with true Δ = 0 declared different)
    different: float  # per contrast: P(declared different)
    equivalent: float  # per contrast: P(declared equivalent)
    mean_seeds: float  # per contrast: seeds at its stop (looks[-1] when never decided)
    trial_share: float  # trials run / trials of the fixed design at looks[-1]


def run_design(
    model: SequentialModel,
    looks: Sequence[int],
    spending: str,
    margin: float,
    studies: int,
    seed: int = 0,
    levels=None,
) -> Outcome:
    """Simulate `studies` studies and replay the design (Bonferroni over the m contrasts)."""
    rng = np.random.default_rng(seed)
    m = len(model.effects)
    null = np.array(model.effects) == 0.0
    stops, verdicts, done = [], [], 0
    while done < studies:
        size = min(CHUNK, studies - done)
        d = simulate(model, size, looks[-1], rng)
        stop, verdict = stopping_looks(d, looks, ALPHA / m, margin, spending, levels)
        stops.append(stop), verdicts.append(verdict)
        done += size
    stop, verdict = np.concatenate(stops), np.concatenate(verdicts)  # [studies, m]
    seeds = np.where(stop >= 0, np.asarray(looks)[np.maximum(stop, 0)], looks[-1])
    trials = seeds.sum(axis=1) + seeds.max(axis=1)  # the reference runs to the last open contrast
    return Outcome(
        family_error=float(((verdict == 1) & null).any(axis=1).mean()) if null.any() else 0.0,
        different=float((verdict == 1).mean()),
        equivalent=float((verdict == 2).mean()),
        mean_seeds=float(seeds.mean()),
        trial_share=float(trials.mean() / ((m + 1) * looks[-1])),
    )


def naive_levels(looks: Sequence[int], m: int) -> tuple[np.ndarray, np.ndarray]:
    """Optional stopping: the fixed design's levels (alpha / m, TOST at 0.05) at every look."""
    return np.full(len(looks), ALPHA / m), np.full(len(looks), 0.05)


def scenarios(margin: float, effect: float) -> dict[str, SequentialModel]:
    return {
        "null, no interaction": SequentialModel(interaction_sd=0.0),
        "null": SequentialModel(),
        "Δ = +margin": SequentialModel(effects=(margin,) * 3),
        "Δ = −margin": SequentialModel(effects=(-margin,) * 3),
        f"Δ = {effect:+.2f}": SequentialModel(effects=(effect,) * 3),
    }


def table(studies: int = 2000, margin: float = 0.05, effect: float = 0.07, seed: int = 0):
    """Rows (scenario, design, Outcome) for both spendings, the fixed design and the naive one."""
    rows = []
    for name, model in scenarios(margin, effect).items():
        designs = {kind: (LOOKS, kind, None) for kind in SPENDING}
        designs["fixed 16 seeds"] = ((LOOKS[-1],), "pocock", None)
        designs["naive: 0.05 at every look"] = (LOOKS, "pocock", naive_levels(LOOKS, 3))
        for design, (looks, kind, levels) in designs.items():
            out = run_design(model, looks, kind, margin, studies, seed, levels)
            rows.append((name, design, out))
    return rows


def format_table(rows, margin: float) -> str:
    head = (
        f"sequential design, looks {LOOKS}, m = 3 contrasts (Bonferroni), alpha {ALPHA}, "
        f"margin ±{margin}"
    )
    lines = [head, f"{'scenario':<22} {'design':<27} FWER  P(diff) P(equiv) seeds trials"]
    for name, design, o in rows:
        lines.append(
            f"{name:<22} {design:<27} {o.family_error:.3f} {o.different:7.3f} "
            f"{o.equivalent:8.3f} {o.mean_seeds:5.1f} {o.trial_share:6.2f}"
        )
    lines.append(
        "FWER: any null contrast declared different; seeds: mean per contrast at its stop; "
        "trials: share of the fixed design's trials"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    import time

    start = time.perf_counter()
    print(format_table(table(), 0.05))
    print(f"({time.perf_counter() - start:.1f} s)")
