"""What a control certifies: its MDE at the design it ran in and its probability of detection at
the effect the study declared for it (`Study(positive_control=Control(arm, effect))`).

A declared effect is fixed before the results, so the probability of detecting it is a property
of the design, not the post-hoc power of an observed Δ (statistics reference §5.5); it is read
as the MDE is, from the control's own variance components with the seed term at its one-sided
80% upper confidence bound, so at an effect equal to the MDE it is exactly 0.8.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from ablate.report.data import numbers
from ablate.report.stats import crossed, inference
from ablate.report.stats.contrasts import GRADED, ContrastRow
from ablate.report.stats.design import upper_factor


def detection_task(d: np.ndarray, effect: float, alpha: float) -> float:
    """P(the crossed t test at `alpha` rejects) for a true |Δ| = |effect|, from per-(seed,
    problem) differences d [n, J]: the inverse of `contrasts.mde_task` (same variance, seed term
    at its 80% upper bound, same normal shift of the t quantiles at the Satterthwaite df)."""
    c = crossed.crossed(d)
    if c.n < inference.MIN_SEEDS or not float(c.se) > 0:
        return float("nan")
    seed = c.seed_var * upper_factor(c.n) / c.n
    var = max(float(seed + c.problem_var / c.problems + c.resid_var / (c.n * c.problems)), 0.0)
    var = max(var, float(c.se) ** 2)
    shift = abs(effect) / np.sqrt(var) - sps.t.ppf(1 - alpha / 2, c.df)
    return float(sps.t.cdf(shift, c.df))


def detection_fixed(sd: float, n: int, effect: float, alpha: float) -> float:
    """The paired t test's power for |effect| with the seed SD at its 80% upper bound."""
    if n < inference.MIN_SEEDS or not np.isfinite(sd) or sd <= 0:
        return float("nan")
    upper = sd * float(np.sqrt(upper_factor(n)))
    return float(inference.power_paired(effect, upper, n, alpha))


@dataclass(frozen=True)
class ControlPower:
    declared: float | None  # the study's declared effect (None: not declared)
    mde: float  # at the design run, 80% power, alpha / m of the control's family
    detection: float  # P(detected) at the declared effect; NaN without one
    sign_ok: bool  # the estimate's sign is the declared one (True without a declaration)


def control_power(row: ContrastRow, declared: float | None) -> ControlPower:
    """The control row's MDE and its detection probability at the declared effect."""
    if declared is None:
        return ControlPower(None, row.mde, float("nan"), True)
    alpha = inference.ALPHA / max(row.family, 1)
    if row.diffs is not None:
        detection = detection_task(row.diffs, declared, alpha)
    else:
        detection = detection_fixed(row.contrast.sd, row.n, declared, alpha)
    sign_ok = bool(np.sign(row.contrast.diff.value) == np.sign(declared))
    return ControlPower(declared, row.mde, detection, sign_ok)


def check(row: ContrastRow, power: ControlPower) -> str:
    """The control's verdict in words: detected (on the declared side), or not, with the
    probability it had of being detected. A positive control missed flags the study
    underpowered; a graded one is missed 1 − P(detect) of the time by design."""
    if row.n < inference.MIN_SEEDS:
        return "too few seeds"
    chance = (
        f" (P(detect) {power.detection:.2f} at its declared "
        f"{numbers.rate(power.declared, sign=True)})"
        if power.declared is not None and np.isfinite(power.detection)
        else ""
    )
    if row.significant and not power.sign_ok:
        return (
            f"DETECTED ON THE WRONG SIDE of its declared {numbers.rate(power.declared, sign=True)}"
        )
    if row.significant:
        return "detected" + chance
    if row.kind == GRADED:  # a smaller effect: missed with probability 1 − P(detect)
        return "not detected" + chance
    return "NOT DETECTED: underpowered" + chance
