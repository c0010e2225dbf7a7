"""The claims' shared rule, for the tutorial's claims and a paper's findings alike: the `Claim`
record, the verdict rule, Holm over the claims, and how arms and seeds are chosen (pairs
differing in the claim's factors only; the seed as the unit).

A claim predicts an effect's sign (`direction` +1 / -1, or 0 for either sign) or, with a
`margin`, no effect: the latter is supported only when its whole 95% interval lies within
±margin, contradicted by a significant difference (its raw p: it stays out of the Holm family,
where adjusting would make a contradiction harder to find), inconclusive otherwise."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ablate import confounds
from ablate.report.data.load import StudyData
from ablate.report.stats import inference
from ablate.report.stats import measures as m

ALPHA = inference.ALPHA
CLIP_BINDS_MIN = 0.02  # upper clip binds on under ~2% of tokens: clip-higher cannot act
NO_SIGNAL_PASS_AT_G = 0.05  # base Pass@G below this: "no signal to amplify"
CEILING = 0.95  # claim 6: a base pass@k this high leaves pass@k no room to gain
EQUIVALENCE = 0.02  # claim 5: template effects whose CIs all lie within ±0.02 count as none
EXACT_PERMUTATIONS_MAX = 8  # cells; above, a seeded Monte Carlo sample of permutations
SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive"
NOT_TESTED, NOT_TESTABLE = "not tested", "not testable at this setting"
HOLDS, FAILS = "holds by construction", "does not hold"
NAN = float("nan")


@dataclass(frozen=True)
class Claim:
    id: str
    statement: str
    statistic: str
    value: float = NAN
    low: float = NAN
    high: float = NAN
    n: int = 0
    p_value: float = NAN
    p_holm: float = NAN
    verdict: str = NOT_TESTED
    arms: str = ""
    note: str = ""
    direction: int = 1  # the sign the claim predicts; 0 = either direction supports it
    margin: float | None = None  # a claim of no effect: |Δ| within ±margin
    source: str = ""  # the published finding it tests, in its paper's words


def verdict(value: float, p_adjusted: float, direction: int = 1) -> str:
    """The verdict rule of `ablate.report.claims`, on a Holm-adjusted p-value."""
    if not (math.isfinite(value) and math.isfinite(p_adjusted)) or p_adjusted >= ALPHA:
        return INCONCLUSIVE
    side = int(np.sign(value))
    return SUPPORTED if direction in (0, side) else CONTRADICTED


def tested(base: Claim, est: inference.Estimate, p: float, **kw) -> Claim:
    """`base` filled with an estimate and its raw p (its verdict comes after Holm)."""
    out = replace(base, value=est.value, low=est.low, high=est.high, n=est.n, p_value=p, **kw)
    if est.n < inference.MIN_SEEDS or not math.isfinite(p):
        why = f"n={est.n}: too few seeds for a test (needs {inference.MIN_SEEDS})"
        return replace(out, verdict=NOT_TESTABLE, note="; ".join(filter(None, [out.note, why])))
    return replace(out, verdict=INCONCLUSIVE)


def untested(base: Claim, note: str, verdict_: str = NOT_TESTED, **kw) -> Claim:
    return replace(base, verdict=verdict_, note=note, **kw)


# --- arms ------------------------------------------------------------------------------------
def main_cell(data: StudyData) -> tuple[str, str]:
    """The (model, template) with the most complete trials: where the arms are compared."""
    done = data.complete()
    if not len(done):
        if not len(data.trials):
            return "", ""
        first = data.trials.iloc[0]
        return first["model"], first["template"]
    return tuple(done.groupby(["model", "template"]).size().idxmax())


def arms_where(data: StudyData, test) -> list[str]:
    """Compared arms with a complete trial in the main cell whose algorithm passes `test`."""
    model, template = main_cell(data)
    done = data.complete()
    done = set(done[(done["model"] == model) & (done["template"] == template)]["arm"])
    return [a for a in data.compared_arms if a in done and test(data.algorithm(a))]


def exact_pair(
    data: StudyData, first: list[str], second: list[str], factors: set[str]
) -> tuple[tuple[str, str] | None, str]:
    """A pair (a, b) that differs in the claim's factors only (the reference arm preferred),
    or None with the reason: the extra fields of the least confounded pair."""
    pairs = [(a, b) for a in first for b in second if a != b]
    if not pairs:
        return None, ""

    def extra(pair: tuple[str, str]) -> list[str]:
        diff = confounds.differing_fields(data.algorithm(pair[0]), data.algorithm(pair[1]))
        return [f for f in diff if f not in factors]

    ref = data.reference_arm
    ranked = sorted(pairs, key=lambda p: (len(extra(p)), ref not in p))
    best = ranked[0]
    if extra(best):
        also = ", ".join(extra(best))
        return None, f"the closest pair ({best[0]}, {best[1]}) also differs in {also}"
    return best, ""


def paired(data: StudyData, values: pd.Series, arm: str, ref: str) -> inference.Contrast:
    model, template = main_cell(data)
    a = m.by_seed(data, values, arm, model, template)
    b = m.by_seed(data, values, ref, model, template)
    return inference.paired_contrast(*m.matched(a, b))


def pair_claim(base: Claim, data: StudyData, values: pd.Series, pair, note: str = "") -> Claim:
    c = paired(data, values, *pair)
    return tested(base, c.diff, c.p_value, arms=f"{pair[0]} vs {pair[1]}", note=note)


def seed_means(data: StudyData, per_trial: pd.Series) -> np.ndarray:
    """Per-trial values averaged within each seed (over arms and cells): one value per seed."""
    seeds = data.trials.set_index("trial_id")["seed"]
    frame = pd.DataFrame({"value": per_trial, "seed": seeds.reindex(per_trial.index)})
    return frame.dropna().groupby("seed")["value"].mean().to_numpy()


def one_sample(base: Claim, values: np.ndarray, **kw) -> Claim:
    values = np.round(values, 12)  # differences of equal floats are 0, not rounding noise
    c = inference.paired_contrast(values, np.zeros_like(values))
    return tested(base, c.diff, c.p_value, **kw)


def no_effect_verdict(c: Claim) -> str:
    """The verdict of a tested claim of no effect (`c.margin` set), on its raw p-value."""
    if math.isfinite(c.p_value) and c.p_value < ALPHA:
        return CONTRADICTED
    inside = c.low >= -c.margin and c.high <= c.margin
    return SUPPORTED if inside else INCONCLUSIVE


def adjudicate(claims: list[Claim]) -> list[Claim]:
    """Each tested claim's verdict: a claim of no effect by its interval against its margin,
    the others by the fixed rule after Holm over them (one family: the claims of one report)."""
    out = [
        replace(c, verdict=no_effect_verdict(c))
        if c.margin is not None and c.verdict == INCONCLUSIVE
        else c
        for c in claims
    ]
    pending = [i for i, c in enumerate(out) if c.verdict == INCONCLUSIVE and c.margin is None]
    adjusted = inference.holm([out[i].p_value for i in pending])
    for i, p in zip(pending, adjusted, strict=True):
        c = out[i]
        out[i] = replace(c, p_holm=float(p), verdict=verdict(c.value, float(p), c.direction))
    return out
