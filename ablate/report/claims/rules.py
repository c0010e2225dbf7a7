"""The claims' shared rule, for the tutorial's claims and a paper's findings alike: the `Claim`
record, the verdict rule and Holm over the claims (how arms are chosen: `claims.arms`).

One estimand (statistics.md §6): a claim whose measure is an eval pass rate is read about the
task, through the headline's crossed seeds × problems contrast (`claims.estimand`: the same
interval, 90% TOST interval and degrees of freedom as `contrasts.task_contrast`); a measure with
no problem dimension (a training metric) is read over seeds and says so (`Claim.reading`).

Verdicts (statistics.md §5.3), one vocabulary for every empirical claim:
- "supported": a difference in the predicted direction (either direction for a claim that
  predicts only a change): Holm-adjusted p < 0.05 over the report's directional claims, and,
  with at most EXACT_SEEDS_MAX seeds, the exact sign-flip test of the per-seed differences
  Holm-adjusted the same way below 0.05 too (the t alone leans on the normality of a few numbers).
- "equivalent within ±δ": the 90% interval lies inside ±δ (TOST at alpha 0.05), δ the margin
  declared before the results (`StudyData.margin`, or a finding's own) and printed with the
  verdict. For a claim of no effect (`null`) this is the claim holding; for a directional claim it
  says the predicted effect, if any, is smaller than δ. A directional claim that is both
  significant and inside ±δ is a small, real difference: "supported", noted as smaller than δ.
- "contradicted": only when the 95% interval lies beyond the margin on the side opposite to the
  prediction (a claim of no effect: beyond ±δ on either side, the exact test of Δ = ±δ agreeing);
  for a directional claim also significant after Holm, by both tests. Without a margin (a claim on
  a scale the study declares none for) the boundary is 0. A difference opposite to the prediction
  but not beyond the margin is "inconclusive", and says so.
- "inconclusive": none of these, or the t test and the exact test disagree on data that could
  have convinced both.
- "not testable at this setting": the data cannot decide it however it came out: too few seeds,
  no variance at all, a factor that barely acts in the run (`arms.ACTS_MIN`), a permutation test
  whose smallest possible p is above alpha. "not testable at n seeds": the t test decides, but
  the exact test sits at its smallest possible p, 2/2^n (0.0625 at 5 seeds), and that is not
  below alpha after Holm: more extreme data could not have convinced it. "not tested": the
  study lacks the arms or data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from ablate.report.claims.arms import main_cell
from ablate.report.data.load import StudyData
from ablate.report.stats import inference
from ablate.report.stats import measures as m
from ablate.report.stats.crossed import EQUIVALENCE_CONFIDENCE

ALPHA = inference.ALPHA
NO_SIGNAL_PASS_AT_G = 0.05  # base Pass@G below this: "no signal to amplify"
EXACT_PERMUTATIONS_MAX = 8  # cells; above, a seeded Monte Carlo sample of permutations
SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive"
EQUIVALENT = "equivalent"  # printed "equivalent within ±δ" (`verdict_text`)
DECIDED = (SUPPORTED, EQUIVALENT, CONTRADICTED)
NOT_TESTED, NOT_TESTABLE = "not tested", "not testable at this setting"
HOLDS, FAILS = "holds by construction", "does not hold"
NAN = float("nan")
#: Up to this many seeds a verdict needs the exact sign-flip test to agree with the t test
#: (2^10 sign patterns; beyond, the t's normal approximation over seeds is trusted alone).
EXACT_SEEDS_MAX = 10
SEED_LEVEL = "seed-level"  # `Claim.reading` of a measure with no problem dimension


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
    p_exact: float = NAN  # exact sign-flip p of the per-seed differences (n <= EXACT_SEEDS_MAX)
    p_exact_holm: float = NAN  # the same, Holm-adjusted over the same family as p_holm
    reading: str = ""  # what the interval is about: the task (seeds × problems) or seed-level
    seed_values: tuple[float, ...] = field(default=(), repr=False)  # per-seed differences
    few_seeds: bool = False  # not testable at this number of seeds (`verdict_text` says so)


def verdict_text(c: Claim) -> str:
    """The verdict as printed: an equivalence names its margin."""
    if c.verdict == EQUIVALENT and c.margin is not None:
        return f"equivalent within ±{c.margin:g}"
    if c.verdict == NOT_TESTABLE and c.few_seeds:
        return f"not testable at {c.n} seeds"
    return c.verdict


def exact_p(diffs: np.ndarray | Sequence[float]) -> float:
    """Two-sided exact sign-flip p of mean = 0 over per-seed differences [n]; NaN outside
    MIN_SEEDS..EXACT_SEEDS_MAX seeds (below: no test; above: the t alone)."""
    d = np.asarray(diffs, dtype=float)
    if not inference.MIN_SEEDS <= len(d) <= EXACT_SEEDS_MAX:
        return NAN
    return float(inference.sign_flip_p(d))


def exact_floor(n: int) -> float:
    """The smallest two-sided p of the exact sign-flip test over n seeds: 2 / 2^n."""
    return 2.0 / 2**n


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


def tested(
    base: Claim,
    est: inference.Estimate,
    p: float,
    *,
    seed_values: np.ndarray | Sequence[float] = (),
    interval90: tuple[float, float] | None = None,
    **kw,
) -> Claim:
    """`base` filled with an estimate, its 90% interval (given, else the t over seeds) and its
    raw p, beside the exact sign-flip p of `seed_values`, the per-seed differences (its verdict
    comes after Holm); "not testable" below MIN_SEEDS seeds or when nothing varies at all."""
    if interval90 is None:
        half90 = float(inference.t_half_width(est.std, est.n, EQUIVALENCE_CONFIDENCE))
        interval90 = (est.value - half90, est.value + half90)
    seeds = tuple(float(v) for v in np.round(np.asarray(seed_values, dtype=float), 12))
    exact = exact_p(seeds) if math.isfinite(p) else NAN
    out = replace(base, value=est.value, low=est.low, high=est.high, n=est.n, p_value=p, **kw)
    out = replace(out, low90=interval90[0], high90=interval90[1], p_exact=exact)
    out = replace(out, seed_values=seeds)
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


def seed_reading(why: str = "a training metric, no problem dimension") -> str:
    return f"{SEED_LEVEL} ({why})"


def seed_claim(base: Claim, arm: np.ndarray, ref: np.ndarray, why: str = "", **kw) -> Claim:
    """A claim on matched per-seed values [n] (NaN pairs dropped): paired t over seeds, the
    exact sign-flip test beside it; the reading says it is seed-level, and why."""
    a, r = np.asarray(arm, dtype=float), np.asarray(ref, dtype=float)
    keep = ~(np.isnan(a) | np.isnan(r))
    c = inference.paired_contrast(a[keep], r[keep])
    reading = seed_reading(why) if why else seed_reading()
    return tested(base, c.diff, c.p_value, seed_values=a[keep] - r[keep], reading=reading, **kw)


def pair_claim(base: Claim, data: StudyData, values: pd.Series, pair, note: str = "") -> Claim:
    """arm − reference on a training metric per trial, paired by seed in the main cell."""
    model, template = main_cell(data)
    a, b = (m.by_seed(data, values, arm, model, template) for arm in pair)
    return seed_claim(base, *m.matched(a, b), arms=f"{pair[0]} vs {pair[1]}", note=note)


def seed_means(data: StudyData, per_trial: pd.Series) -> np.ndarray:
    """Per-trial values averaged within each seed (over arms and cells): one value per seed."""
    seeds = data.trials.set_index("trial_id")["seed"]
    frame = pd.DataFrame({"value": per_trial, "seed": seeds.reindex(per_trial.index)})
    return frame.dropna().groupby("seed")["value"].mean().to_numpy()


def one_sample(base: Claim, values: np.ndarray, **kw) -> Claim:
    values = np.round(values, 12)  # differences of equal floats are 0, not rounding noise
    return seed_claim(base, values, np.zeros_like(values), **kw)


def _own_holm(out: list[Claim], pending: list[int], p_of) -> dict[int, float]:
    """Holm once over every pending claim's contrasts (`p_of(claim)`: its raw p's); each claim
    takes the smallest adjusted p of its own."""
    members = [(i, p) for i in pending for p in p_of(out[i])]
    adjusted = inference.holm([p for _, p in members])
    own = {i: [q for (j, _), q in zip(members, adjusted, strict=True) if j == i] for i in pending}
    return {i: float(np.nanmin(q)) if np.isfinite(q).any() else NAN for i, q in own.items()}


def _exact_members(c: Claim) -> tuple[float, ...]:
    """A claim's entries in the exact family: its exact p, else its own p (no exact test)."""
    return c.family or ((c.p_exact if math.isfinite(c.p_exact) else c.p_value),)


def adjudicate(claims: Sequence[Claim]) -> list[Claim]:
    """Each tested claim's verdict (`decide`, then `confirmed`): Holm once over every directional
    claim's contrasts (a claim standing for several contrasts, claim 5, enters with each of them
    and takes the smallest adjusted p of its own), for the t p's and, the same way, for the exact
    ones; a claim of no effect by its intervals against its margin, outside the Holm family."""
    out = list(claims)
    pending = [i for i, c in enumerate(out) if c.verdict == INCONCLUSIVE and not c.null]
    t_holm = _own_holm(out, pending, lambda c: c.family or (c.p_value,))
    exact_holm = _own_holm(out, pending, _exact_members)
    for i in pending:
        exact = exact_holm[i] if math.isfinite(out[i].p_exact) else NAN
        out[i] = replace(out[i], p_holm=t_holm[i], p_exact_holm=exact)
    for i, c in enumerate(out):
        if c.verdict == INCONCLUSIVE:
            verdict, note = decide(c)
            verdict, note, few = confirmed(c, verdict, note)
            out[i] = replace(c, verdict=verdict, note=_with_note(c, note), few_seeds=few)
    return out


def confirmed(c: Claim, verdict: str, note: str) -> tuple[str, str, bool]:
    """A supported or contradicted verdict kept only when the exact sign-flip test agrees: of
    Δ = 0 (Holm-adjusted as the t) for a directional claim, of Δ = ±margin for a claim of no
    effect beyond its margin. Otherwise equivalent (the 90% interval inside the margin), "not
    testable at n seeds" (the exact p at its floor 2/2^n: no data could have convinced it) or
    inconclusive, the reason in the note. (verdict, note, few_seeds)."""
    if verdict not in (SUPPORTED, CONTRADICTED):
        return verdict, note, False
    n = len(c.seed_values)
    if c.null:  # beyond ±margin: the exact test of the per-seed differences against it
        raw = adjusted = exact_p(np.asarray(c.seed_values) - np.sign(c.value) * c.margin)
        what = f"of Δ = {np.sign(c.value) * c.margin:+g}"
    else:
        raw, adjusted, what = c.p_exact, c.p_exact_holm, "(Holm)"
    if not math.isfinite(raw) or adjusted < ALPHA:
        return verdict, note, False
    if _inside(c.low90, c.high90, c.margin):
        why = "inside the margin; the t test finds a difference the exact test does not confirm"
        return EQUIVALENT, why, False
    said = f"the t test alone would say {verdict}"
    floor = exact_floor(n)
    if raw <= floor * (1 + 1e-9):
        after = f" ({adjusted:.3g} after Holm)" if adjusted > raw * (1 + 1e-9) else ""
        why = f"the exact test's smallest p at {n} seeds is 2/2^{n} = {floor:.4g}{after}"
        return NOT_TESTABLE, f"{said}, but {why}", True
    return INCONCLUSIVE, f"{said}; the exact sign-flip test {what} gives p = {adjusted:.3g}", False
