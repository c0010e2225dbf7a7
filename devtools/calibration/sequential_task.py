"""The sequential design on whole simulated studies (`devtools.calibration.task_level`: fresh
problems every study, binomial eval samples shared by the arms of a seed, an arm × problem
interaction τ, heavy-tailed seeds on request), the old rule (information = seed count, df capped
at n − 1) beside the new one (information from the crossed components, `crossed.look_df`, a
contrast stopping when seeds cannot help), against the fixed design at looks[-1] seeds.

Every design reads the same simulated studies (common random numbers across the rows of a
scenario). A study has 4 arms: a reference and 3 compared arms at the same true task-level Δ
(`effects`); the sequential designs split alpha over the 3 contrasts (Bonferroni), the fixed
design is the report's own (Holm over the crossed p-values, TOST on the 90% interval).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ablate.report.stats import crossed, inference
from ablate.report.stats.sequential import INFORMATION, SEEDS, stopping_looks
from devtools.calibration.gates import Gate, at_least, at_most
from devtools.calibration.task_level import TaskModel, simulate_task

LOOKS = (3, 5, 8, 12, 16)
ALPHA, MARGIN = 0.05, 0.03
CHUNK = 250  # simulated studies per array
BASE = TaskModel(arms=4, seeds=LOOKS[-1], problems=64, samples=8)

FIXED, BONFERRONI = "fixed 16 seeds, Holm", "fixed 16 seeds, Bonferroni"
#: design label -> (looks, spending, rule); FIXED: the report's fixed design at looks[-1] (Holm
#: over the contrasts); BONFERRONI: one look of the new rule, alpha split as the looks split it
DESIGNS = {
    FIXED: ((LOOKS[-1],), "", ""),
    BONFERRONI: ((LOOKS[-1],), "obrien_fleming", INFORMATION),
    "O'Brien–Fleming, old": (LOOKS, "obrien_fleming", SEEDS),
    "O'Brien–Fleming, new": (LOOKS, "obrien_fleming", INFORMATION),
    "Pocock, old": (LOOKS, "pocock", SEEDS),
    "Pocock, new": (LOOKS, "pocock", INFORMATION),
}


@dataclass(frozen=True)
class Outcome:
    """Rates over simulated studies (per contrast unless `family` says so)."""

    family_error: float  # P(any contrast with true Δ = 0 declared different)
    different: float  # per contrast: P(declared different): power where Δ ≠ 0
    equivalent: float  # per contrast: P(declared equivalent)
    cannot_help: float  # per contrast: P(stopped early because seeds cannot help)
    mean_seeds: float  # per contrast: seeds at its stop (looks[-1] when never decided)
    trial_share: float  # trials run / trials of the fixed design at looks[-1]
    studies: int


def differences(model: TaskModel, studies: int, seed: int) -> np.ndarray:
    """d[studies, arms − 1, seeds, J] = compared arm − reference, per (seed, problem)."""
    rng = np.random.default_rng(seed)
    parts = []
    for start in range(0, studies, CHUNK):
        y = simulate_task(model, min(CHUNK, studies - start), rng, fixed=False).y
        parts.append((y[:, 1:] - y[:, :1]).astype(float))
    return np.concatenate(parts)


def fixed_verdicts(d: np.ndarray, margin: float = MARGIN) -> np.ndarray:
    """The report's fixed design on d [studies, m, n, J]: verdict codes [studies, m] (1
    different: Holm p < alpha; 2 equivalent: the 90% interval inside ±margin; 0 neither)."""
    c = crossed.crossed(d)
    different = inference.holm(c.p_value()) < ALPHA
    half = c.half_width(crossed.EQUIVALENCE_CONFIDENCE)
    equivalent = crossed.equivalent(c.mean - half, c.mean + half, margin)
    return np.where(different, 1, np.where(equivalent, 2, 0))


def outcome(d, null, looks, kind, rule, margin: float = MARGIN, levels=None) -> Outcome:
    """Replay one design on d [studies, m, n, J]; `null[m]`: which contrasts have Δ = 0; a
    single look without a rule is the report's fixed design (`fixed_verdicts`)."""
    m = d.shape[1]
    if len(looks) == 1 and not rule:
        verdict = fixed_verdicts(d[..., : looks[0], :], margin)
        stop = np.where(verdict > 0, 0, -1)
    else:
        stop, verdict = stopping_looks(d, looks, ALPHA / m, margin, kind, levels, rule)
    seeds = np.where(stop >= 0, np.asarray(looks)[np.maximum(stop, 0)], looks[-1])
    trials = seeds.sum(axis=1) + seeds.max(axis=1)  # the reference runs to the last open contrast
    null = np.asarray(null, dtype=bool)
    family = ((verdict == 1) & null).any(axis=1).mean() if null.any() else 0.0
    return Outcome(
        family_error=float(family),
        different=float((verdict == 1).mean()),
        equivalent=float((verdict == 2).mean()),
        cannot_help=float((verdict == 3).mean()),
        mean_seeds=float(seeds.mean()),
        trial_share=float(trials.mean() / ((m + 1) * looks[-1])),
        studies=len(d),
    )


def scenario(tau: float, effect: float, base: TaskModel = BASE, **change) -> TaskModel:
    effects = None if effect == 0 else (0.0, *(effect,) * (base.arms - 1))
    return replace(base, interaction=tau, effects=effects, **change)


def table(
    studies: int = 2000,
    taus=(0.0, 0.5, 1.0),
    effects=(0.0, 0.03, 0.04, 0.05),
    seed: int = 0,
    designs: dict | None = None,
) -> list[tuple[float, float, str, Outcome]]:
    """Rows (τ, Δ, design, Outcome): every design on the same studies of each (τ, Δ)."""
    rows = []
    for i, tau in enumerate(taus):
        for j, effect in enumerate(effects):
            model = scenario(tau, effect)
            d = differences(model, studies, seed + 100 * i + j)
            null = [effect == 0] * d.shape[1]
            for name, (looks, kind, rule) in (designs or DESIGNS).items():
                rows.append((tau, effect, name, outcome(d, null, looks, kind, rule)))
    return rows


def format_table(rows) -> str:
    head = (
        "| τ | Δ | design | FWER | P(different) | P(equivalent) | seeds cannot help | "
        "seeds per contrast | trials / fixed |"
    )
    lines = [head, "|---|---|---|---|---|---|---|---|---|"]
    for tau, effect, name, o in rows:
        fwer = f"{o.family_error:.3f}" if effect == 0 else "—"
        cells = (f"{tau:g}", f"{effect:g}", name, fwer, f"{o.different:.3f}")
        cells += (f"{o.equivalent:.3f}", f"{o.cannot_help:.3f}", f"{o.mean_seeds:.1f}")
        lines.append("| " + " | ".join((*cells, f"{o.trial_share:.2f}")) + " |")
    return "\n".join(lines)


def adversarial_gates(studies: int, seed: int = 0) -> list[Gate]:
    """The new rule under the null with τ = 1 and heavy-tailed (t3) seeds, both spendings:
    family-wise error <= 0.05; and with τ = 0.5, Δ = 0.05 (O'Brien–Fleming): at least 15% fewer
    trials than the fixed 16-seed design at its power (within 0.03; alpha split over the
    contrasts in both)."""
    heavy = replace(BASE, heavy_tails=True)
    d = differences(scenario(1.0, 0.0, heavy), studies, seed)
    gates = []
    for label, kind in (("O'Brien–Fleming", "obrien_fleming"), ("Pocock", "pocock")):
        o = outcome(d, [True] * d.shape[1], LOOKS, kind, INFORMATION)
        name = f"sequential: family-wise error, {label}, τ 1, heavy-tailed seeds"
        gates.append(at_most(name, o.family_error, ALPHA, studies))
    d = differences(scenario(0.5, 0.05), studies, seed + 1)
    null = [False] * d.shape[1]
    seq, fixed = (outcome(d, null, *DESIGNS[k]) for k in ("O'Brien–Fleming, new", BONFERRONI))
    name = "sequential: trials / fixed design, τ 0.5, Δ 0.05, O'Brien–Fleming"
    gates.append(Gate(name, seq.trial_share, 0.0, 0.85, studies))
    name = "sequential: power, τ 0.5, Δ 0.05, O'Brien–Fleming (the fixed design's, within 0.03)"
    gates.append(at_least(name, seq.different, fixed.different - 0.03, studies))
    return gates


LEGEND = f"""\
Looks {LOOKS}, 3 contrasts (Bonferroni), alpha {ALPHA}, margin ±{MARGIN}; studies on fresh
problems (64 problems × 8 samples, seed SD 0.035, τ = arm × problem logit SD); every design on
the same studies of its (τ, Δ). old: information = seed count, df capped at n − 1. new:
information from the crossed components, df `crossed.look_df`, a contrast stopping when seeds
cannot help (its SE would drop < 5%). fixed, Holm: the report's fixed design at 16 seeds;
fixed, Bonferroni: the same seeds with alpha split over the contrasts as the sequential designs
split it (the like-for-like reference: Holm's step-down gains power when several are real).
FWER: null studies with any contrast declared different [≤ 0.05]; P(different): power where
Δ ≠ 0; seeds: mean per contrast at its stop; trials: share of the fixed design's trials (the
reference runs to the last open contrast)."""
