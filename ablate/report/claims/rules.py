"""The claims' shared rule, for the tutorial's claims and a paper's findings alike: the `Claim`
record, the verdict rule, Holm over the claims, and how arms and seeds are chosen (pairs
differing in the claim's factors only; the seed as the unit).

Verdicts (statistics.md §5.3), one vocabulary for every empirical claim:
- "supported": a difference in the predicted direction (either direction for a claim that
  predicts only a change): Holm-adjusted p < 0.05 over the report's directional claims.
- "equivalent within ±δ": the 90% interval lies inside ±δ (TOST at alpha 0.05), δ the margin
  declared before the results (`StudyData.margin`, or a finding's own) and printed with the
  verdict. For a claim of no effect (`null`) this is the claim holding; for a directional claim it
  says the predicted effect, if any, is smaller than δ. A directional claim that is both
  significant and inside ±δ is a small, real difference: "supported", noted as smaller than δ.
- "contradicted": only when the 95% interval lies beyond the margin on the side opposite to the
  prediction (a claim of no effect: beyond ±δ on either side); for a directional claim also
  significant after Holm. Without a margin (a claim on a scale the study declares none for) the
  boundary is 0. A difference opposite to the prediction but not beyond the margin is
  "inconclusive", and says so.
- "inconclusive": none of these.
- "not testable at this setting": the data cannot decide it however it came out: too few seeds,
  no variance at all, a factor that barely acts in the run (`ACTS_MIN`), a permutation test whose
  smallest possible p is above alpha. "not tested": the study lacks the arms or data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ablate.factors import confounds
from ablate.report.data.load import StudyData
from ablate.report.stats import inference
from ablate.report.stats import measures as m
from ablate.report.stats.crossed import EQUIVALENCE_CONFIDENCE

ALPHA = inference.ALPHA
#: A factor that changes under 1% of the units it acts on (the upper clip binding on < 1% of
#: tokens, < 1% of samples truncated for overlong filtering) leaves the two arms nearly the same
#: run under common random numbers: "equivalent" would follow by construction and a difference
#: could not be seen, so the claim is "not testable at this setting" (statistics.md §5.3).
ACTS_MIN = 0.01
CLIP_BINDS_MIN = ACTS_MIN  # claim 2's name for it
#: Fields whose effect depends on an event in the run, with the logged metric that counts the
#: event (a fraction of tokens or samples) and how a note says it.
FACTOR_ACTIVITY = {
    "clip_high": ("policy/clip_frac_high", "the upper clip binds on {:.2%} of tokens"),
    "mask_truncated": ("length/truncation_rate", "{:.2%} of samples are truncated"),
}
NO_SIGNAL_PASS_AT_G = 0.05  # base Pass@G below this: "no signal to amplify"
CEILING = 0.95  # claim 6: a base pass@k this high leaves pass@k no room to gain
EXACT_PERMUTATIONS_MAX = 8  # cells; above, a seeded Monte Carlo sample of permutations
SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive"
EQUIVALENT = "equivalent"  # printed "equivalent within ±δ" (`verdict_text`)
DECIDED = (SUPPORTED, EQUIVALENT, CONTRADICTED)
NOT_TESTED, NOT_TESTABLE = "not tested", "not testable at this setting"
HOLDS, FAILS = "holds by construction", "does not hold"
NAN = float("nan")


@dataclass(frozen=True)
class Claim:
    id: str
    statement: str
    statistic: str
    value: float = NAN
    low: float = NAN  # 95% interval
    high: float = NAN
    n: int = 0
    p_value: float = NAN
    p_holm: float = NAN
    verdict: str = NOT_TESTED
    arms: str = ""
    note: str = ""
    direction: int = 1  # the sign the claim predicts; 0 = either direction supports it
    margin: float | None = None  # the equivalence margin ±δ (None: none on this scale)
    source: str = ""  # the published finding it tests, in its paper's words
    null: bool = False  # a claim of no effect: it holds when equivalent within ±margin
    low90: float = NAN  # the 90% interval: TOST against the margin
    high90: float = NAN
    family: tuple[float, ...] = ()  # raw p of every contrast the claim stands for (claim 5)


def verdict_text(c: Claim) -> str:
    """The verdict as printed: an equivalence names its margin."""
    if c.verdict == EQUIVALENT and c.margin is not None:
        return f"equivalent within ±{c.margin:g}"
    return c.verdict


def _beyond(low: float, high: float, side: int, margin: float) -> bool:
    """The interval lies past the margin on `side` (+1: above +margin, -1: below −margin)."""
    return bool(low > margin) if side > 0 else bool(high < -margin)


def _inside(low: float, high: float, margin: float | None) -> bool:
    return margin is not None and margin > 0 and low > -margin and high < margin


def decide(c: Claim) -> tuple[str, str]:
    """A tested claim's verdict and what the note adds (module docstring: the rule)."""
    if not math.isfinite(c.value):
        return INCONCLUSIVE, ""
    equivalent = _inside(c.low90, c.high90, c.margin)
    real = inference.Estimate(c.value, c.low, c.high, c.n).excludes(0)
    if c.null:
        if c.margin is None:  # a claim of no effect needs its margin (`Finding` checks it)
            return INCONCLUSIVE, "no margin declared"
        if equivalent:
            return EQUIVALENT, "a small, real difference inside the margin" if real else ""
        if _beyond(c.low, c.high, 1, c.margin) or _beyond(c.low, c.high, -1, c.margin):
            return CONTRADICTED, ""
        return INCONCLUSIVE, f"a difference, not shown beyond ±{c.margin:g}" if real else ""
    significant = math.isfinite(c.p_holm) and c.p_holm < ALPHA
    side = int(np.sign(c.value))
    if significant and c.direction in (0, side):
        return SUPPORTED, f"smaller than the margin ±{c.margin:g}" if equivalent else ""
    if equivalent:  # with a real difference inside the margin, against the claim if so
        return EQUIVALENT, "a small, real difference inside the margin" if real else ""
    if not significant:
        return INCONCLUSIVE, ""
    if not (math.isfinite(c.low) and math.isfinite(c.high)):  # a test without an interval
        return (CONTRADICTED, "") if c.margin is None else (INCONCLUSIVE, "no interval")
    if _beyond(c.low, c.high, side, c.margin or 0.0):
        return CONTRADICTED, ""
    # significant against the prediction, but not shown beyond the margin
    return INCONCLUSIVE, f"a difference opposite to the claim, not beyond ±{c.margin or 0:g}"


def _with_note(c: Claim, note: str) -> str:
    return "; ".join(filter(None, [c.note, note]))


def tested(base: Claim, est: inference.Estimate, p: float, **kw) -> Claim:
    """`base` filled with an estimate, its 90% interval and its raw p (its verdict comes after
    Holm); "not testable" below MIN_SEEDS seeds or when the differences do not vary at all."""
    half90 = float(inference.t_half_width(est.std, est.n, EQUIVALENCE_CONFIDENCE))
    out = replace(base, value=est.value, low=est.low, high=est.high, n=est.n, p_value=p, **kw)
    out = replace(out, low90=est.value - half90, high90=est.value + half90)
    if est.n < inference.MIN_SEEDS:
        why = f"n={est.n}: too few seeds for a test (needs {inference.MIN_SEEDS})"
        return replace(out, verdict=NOT_TESTABLE, note=_with_note(out, why))
    if not math.isfinite(p):
        why = zero_variance_note(est)
        return replace(out, verdict=NOT_TESTABLE, note=_with_note(out, why))
    return replace(out, verdict=INCONCLUSIVE)


def zero_variance_note(est: inference.Estimate) -> str:
    """Why a contrast over enough seeds has no p-value: its differences never vary."""
    if est.value == 0:
        return (
            f"the two arms gave the same value in all {est.n} seeds: no variance, no test (the "
            "factor did not change the run)"
        )
    return f"the difference is {est.value:+.4g} in all {est.n} seeds: no variance, no p-value"


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


def activity(data: StudyData, metric: str, arms: Sequence[str], model: str, template: str) -> float:
    """How often the event `metric` counts happens (mean over all steps, then seeds), the larger
    over `arms`: the share of tokens or samples a factor acting on it can change. NaN when
    neither arm logs it."""
    per_trial = m.window_mean(data.history, metric, 0.0, 1.0)
    means = [m.by_seed(data, per_trial, a, model, template).dropna() for a in arms]
    return max((float(s.mean()) for s in means if len(s)), default=NAN)


def inactive_factor(data: StudyData, arm: str, ref: str, model: str, template: str) -> str:
    """Why the pair cannot test its factor at this setting, or "": the two arms differ only in
    fields that act on an event (`FACTOR_ACTIVITY`) and that event happens on fewer than
    ACTS_MIN of its tokens or samples in both arms. A field that acts unconditionally, or an
    event neither arm logs, leaves the pair testable."""
    known = set(data.algorithms) | set(data.trials["arm"])
    if not {arm, ref} <= known:
        return ""
    fields = confounds.differing_fields(data.algorithm(arm), data.algorithm(ref))
    if not fields or not set(fields) <= set(FACTOR_ACTIVITY):
        return ""
    notes = []
    for name in fields:
        metric, words = FACTOR_ACTIVITY[name]
        rate = activity(data, metric, (arm, ref), model, template)
        if not rate < ACTS_MIN:  # NaN (not logged) included: cannot tell, so it is tested
            return ""
        notes.append(words.format(rate))
    return (
        f"{' and '.join(notes)} (the larger of {arm} and {ref}): under {ACTS_MIN:.0%}, the "
        f"factor barely acts here"
    )


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


def adjudicate(claims: Sequence[Claim]) -> list[Claim]:
    """Each tested claim's verdict (`decide`): Holm once over every directional claim's
    contrasts (a claim standing for several contrasts, claim 5, enters with each of them and
    takes the smallest adjusted p of its own); a claim of no effect by its intervals against its
    margin, outside the Holm family."""
    out = list(claims)
    pending = [i for i, c in enumerate(out) if c.verdict == INCONCLUSIVE and not c.null]
    members = [(i, p) for i in pending for p in (out[i].family or (out[i].p_value,))]
    adjusted = inference.holm([p for _, p in members])
    for i in pending:
        own = [q for (j, _), q in zip(members, adjusted, strict=True) if j == i]
        out[i] = replace(out[i], p_holm=float(np.nanmin(own)) if np.isfinite(own).any() else NAN)
    for i, c in enumerate(out):
        if c.verdict == INCONCLUSIVE:
            verdict, note = decide(c)
            out[i] = replace(c, verdict=verdict, note=_with_note(c, note))
    return out
