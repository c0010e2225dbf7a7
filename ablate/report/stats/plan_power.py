"""The power of a planned design, by formula and by simulation, for its contrasts and its controls.

`ablate plan` recommends the cheapest design whose MDE reaches the effect; this module checks
the promise: it simulates studies of that design (seeds × problems × samples) from the variance
components the plan designed with (the seed term at its 80% upper bound), runs each through the
report's own task-level test (`crossed`) and counts the rejections. A design priced on the wrong
variance (the eval noise of each arm summed instead of that of their difference, when the arms
share eval draws) shows up here as a simulated power far from 0.8.

The controls the study declares (`Study(positive_control=Control(...), graded_control=...)`)
get the same two numbers at the same design, at their declared effects: the probability, stated
before the study runs, that each will be detected on the contrasts' seeds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ablate.report.stats import design
from ablate.report.stats.crossed import crossed
from ablate.report.stats.design import Components, Design
from ablate.report.stats.inference import ALPHA

STUDIES = 2000  # simulated studies per power: Monte-Carlo SE ≈ 0.009 at 0.8
CHUNK_VALUES = 4_000_000  # simulated differences held at once


def simulate_power(
    c: Components,
    n: int,
    problems: int,
    samples: int,
    effect: float,
    alpha: float,
    studies: int = STUDIES,
    seed: int = 0,
) -> float:
    """Share of `studies` simulated studies of the design (n, J, K) whose crossed t test rejects
    at `alpha`, per-(seed, problem) differences d = effect + a_s + b_j + e_sj with a, b, e normal
    of variances σ²_seed, σ²_problem and σ²_sp + v/K (deterministic in `seed`)."""
    rng = np.random.default_rng(seed)
    sd_cell = np.sqrt(c.sp_var + c.sample_var / samples)
    chunk = max(1, CHUNK_VALUES // (n * problems))
    rejected = 0
    for start in range(0, studies, chunk):
        m = min(chunk, studies - start)
        d = effect + np.sqrt(c.seed_var) * rng.standard_normal((m, n, 1))
        d = d + np.sqrt(c.problem_var) * rng.standard_normal((m, 1, problems))
        d = d + sd_cell * rng.standard_normal((m, n, problems))
        p = np.atleast_1d(crossed(d).p_value())
        rejected += int(np.count_nonzero(p < alpha))
    return rejected / studies


@dataclass(frozen=True)
class PowerCheck:
    label: str
    kind: str  # "contrast", "positive control" or "graded control"
    effect: float  # |Δ| the power is for (a control's declared effect, signed)
    alpha: float
    power: float  # by formula, at the components the plan designs with (seed term at its bound)
    simulated: float  # by simulation, same components (NaN when not simulated)
    point: float  # by formula at the pilot's point estimates
    note: str = ""


def check(
    label: str,
    kind: str,
    c: Components,
    best: Design,
    effect: float,
    alpha: float,
    studies: int = STUDIES,
    note: str = "",
) -> PowerCheck:
    """Power of `best` against `effect` for components `c` (a pilot's point estimates)."""
    upper = design.at_upper_bound(c)
    shape = (best.seeds, best.problems, best.samples)
    power = float(design.design_power(upper, *shape, effect, alpha))
    simulated = simulate_power(upper, *shape, abs(effect), alpha, studies) if studies else np.nan
    point = float(design.design_power(c, *shape, effect, alpha))
    return PowerCheck(label, kind, effect, alpha, power, simulated, point, note)


def variance_at(c: Components, best: Design) -> float:
    """Var(Δ̂) of the design `best` with the seed term at its upper bound."""
    upper = design.at_upper_bound(c)
    return float(design.design_variance(upper, best.seeds, best.problems, best.samples))


def contrast_checks(
    components: dict[str, Components],
    best: Design,
    effect: float,
    alpha: float,
    studies: int = STUDIES,
) -> list[PowerCheck]:
    """Each planned contrast's power at the recommended design (the worst one's is the plan's
    80%)."""
    return [check(k, "contrast", c, best, effect, alpha, studies) for k, c in components.items()]


def control_checks(
    controls: list,
    components: dict[str, Components],
    stand_in: Components,
    best: Design,
    cells: list[tuple[str, str]],
    studies: int = STUDIES,
) -> list[PowerCheck]:
    """Each declared control's detection probability at the recommended design and its declared
    effect, on its own Holm family (one test per base model × template: Bonferroni alpha / m).
    `components` holds the pilot's, keyed "arm · model · template"; a control the pilot did not
    run is read with `stand_in` (the worst contrast's components), and says so."""
    alpha = ALPHA / max(len(cells), 1)
    out = []
    for control in controls:
        if control.effect is None:
            continue
        kind = f"{control.kind} control"
        labels = (f"{control.arm} · {m} · {t}" for m, t in cells)
        found = [components[k] for k in labels if k in components]
        note = "" if found else "no pilot data for it: the contrasts' components stand in"
        worst = max(found or [stand_in], key=lambda c: variance_at(c, best))
        out.append(check(control.arm, kind, worst, best, control.effect, alpha, studies, note))
    return out
