"""How trials end, as outcomes with their own exact contrasts: divergence, saturation, failure.

A trial ends one of four ways (`outcome_class`):
- finished: trained to its budget; its final eval enters the headline.
- diverged: a non-finite loss, gradient or weight (`DivergedError`): the algorithm's outcome,
  its own outcome in the headline too (`stats.divergence`, `measures.DIVERGED_RULE`).
- saturated: the algorithm's own data filter ran out of informative data, so the trial stopped
  early: dynamic sampling found too few groups with unequal rewards within `max_gen_batches`, or
  No-Positive-Resampling retired every training prompt. The trainer ends such a trial with
  outcome 'failed' (a `TrialError`), but it is the algorithm's behaviour on this base model and
  task, not the harness's: it is recognised here by the trainer's message
  (`SATURATION_REASONS`) and never counted as a failure.
- failed: anything else that stopped a run (an infrastructure or data error, a killed run): the
  harness's outcome, about the run and not the algorithm. Missing and unfinished trials have no
  outcome yet and count nowhere.

Rates are over the trials that ended: divergence and saturation over the trials with an
algorithm outcome (finished, diverged, saturated: a harness failure says nothing about whether
the algorithm would have diverged), failure over every ended trial. Each arm's rate is compared
with the reference arm's in the same base model · template cell by Boschloo's exact test on the
2×2 counts (`exact_p`): unconditional, its size at most alpha for any common rate, and at
least as powerful as Fisher's conditional test (exactly, over all tables: at 10 seeds an arm
diverging 20% of the time against none is detected with probability 0.12 vs 0.03, at 30% 0.35
vs 0.15; under equal rates 0.1–0.4 at 5–16 seeds it rejects 0.001–0.041 vs 0.001–0.019). It
needs no seed-by-seed pairing: a seed whose partner failed or is missing still counts;
McNemar's exact test on paired seeds would keep only the discordant pairs, few at these rates.
If the arms of a seed share a tendency to diverge (the same data order), the difference of the
counts varies less than the test assumes, so it only grows more conservative. A table with no
event in either arm (or only events) has a single possible outcome under its margins: no test,
NaN. Each rate has its exact Clopper–Pearson interval; Holm adjusts the table's tests together.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy import stats as sps

from ablate.report.data.load import StudyData
from ablate.report.data.memo import per_study
from ablate.report.stats import inference

FINISHED, DIVERGED, SATURATED, FAILED, PENDING = (
    "finished",
    "diverged",
    "saturated",
    "failed",
    "pending",
)
#: The trainer's messages (`ablate.stages.batch`) for a trial its algorithm's data filter stopped.
SATURATION_REASONS = ("dynamic sampling found", "No-Positive-Resampling has retired all")
ENDED_STATUS = ("FINISHED", "FAILED", "KILLED")


def outcome_class(trials: pd.DataFrame) -> pd.Series:
    """trial_id -> finished | diverged | saturated | failed | pending (module docstring)."""

    def one(t: pd.Series) -> str:
        if bool(t["complete"]):
            return FINISHED
        if t["outcome"] == DIVERGED:
            return DIVERGED
        reason = t["reason"] if isinstance(t.get("reason"), str) else ""
        if t["outcome"] == "failed" and any(r in reason for r in SATURATION_REASONS):
            return SATURATED
        if t["outcome"] == "failed" or t.get("status") in ENDED_STATUS:
            return FAILED
        return PENDING

    classes = [one(t) for _, t in trials.iterrows()]
    return pd.Series(classes, index=trials["trial_id"].to_numpy(), dtype=object)


def clopper_pearson(
    k: np.ndarray | int, n: np.ndarray | int, confidence: float = inference.CONFIDENCE
) -> tuple[np.ndarray, np.ndarray]:
    """Exact (Clopper–Pearson) interval of a binomial rate k/n (broadcast shapes [...] ->
    ([...], [...])): beta quantiles, 0 at k = 0 and 1 at k = n; NaN where n = 0. Covers at
    least `confidence` whatever the true rate (conservative)."""
    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    tail = (1 - confidence) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.where(k > 0, sps.beta.ppf(tail, k, n - k + 1), 0.0)
        high = np.where(k < n, sps.beta.ppf(1 - tail, k + 1, n - k), 1.0)
    bad = n <= 0
    return np.where(bad, np.nan, low)[()], np.where(bad, np.nan, high)[()]


def fisher_p(k: int, n: int, ref_k: int, ref_n: int) -> float:
    """Two-sided Fisher exact p of k/n against ref_k/ref_n; NaN when either group is empty or
    the 2×2 table has no event (or no non-event) at all: its margins then allow one table only."""
    events, total = k + ref_k, n + ref_n
    if n <= 0 or ref_n <= 0 or events == 0 or events == total:
        return float("nan")
    table = [[k, n - k], [ref_k, ref_n - ref_k]]
    return float(sps.fisher_exact(table, alternative="two-sided").pvalue)


def exact_p(k: int, n: int, ref_k: int, ref_n: int) -> float:
    """Two-sided Boschloo exact p of k/n against ref_k/ref_n (module docstring); NaN where
    `fisher_p` has no test (an empty group, no event or only events)."""
    if not np.isfinite(fisher_p(k, n, ref_k, ref_n)):
        return float("nan")
    return _boschloo(int(k), int(n), int(ref_k), int(ref_n))


@functools.lru_cache(maxsize=4096)
def _boschloo(k: int, n: int, ref_k: int, ref_n: int) -> float:
    table = [[k, ref_k], [n - k, ref_n - ref_k]]  # columns: the two groups
    return float(min(sps.boschloo_exact(table, alternative="two-sided").pvalue, 1.0))


def rate(k: int, n: int) -> inference.Estimate:
    """k/n with its exact 95% interval; N = n trials."""
    low, high = clopper_pearson(k, n)
    value = k / n if n > 0 else float("nan")
    return inference.Estimate(value, float(low), float(high), int(n))


@dataclass(frozen=True)
class OutcomeRow:
    """One outcome's rate in one arm against the reference arm's, in one cell."""

    arm: str
    reference: str
    model: str
    template: str
    outcome: str  # diverged | saturated | failed
    k: int
    n: int
    ref_k: int
    ref_n: int
    p_value: float  # Boschloo's exact test, two-sided; NaN: no test
    p_holm: float = float("nan")

    @property
    def rate(self) -> inference.Estimate:
        return rate(self.k, self.n)

    @property
    def ref_rate(self) -> inference.Estimate:
        return rate(self.ref_k, self.ref_n)

    @property
    def diff(self) -> float:
        return self.rate.value - self.ref_rate.value


def counts(classes: pd.Series, outcome: str) -> tuple[int, int]:
    """(events, trials at risk) of `outcome` among one cell's classified trials."""
    algorithm = int(classes.isin([FINISHED, DIVERGED, SATURATED]).sum())
    if outcome == FAILED:
        return int((classes == FAILED).sum()), algorithm + int((classes == FAILED).sum())
    return int((classes == outcome).sum()), algorithm


def _cell_classes(data: StudyData, arm: str, model: str, template: str) -> pd.Series:
    t = data.trials
    rows = t[(t["arm"] == arm) & (t["model"] == model) & (t["template"] == template)]
    return outcome_class(rows) if len(rows) else pd.Series(dtype=object)


def outcomes_of(data: StudyData) -> list[str]:
    """The outcomes the table compares: divergence and failure always, saturation when any
    trial of the study saturated."""
    seen = set(outcome_class(data.trials)) if len(data.trials) else set()
    return [DIVERGED, *([SATURATED] if SATURATED in seen else []), FAILED]


@per_study
def outcome_contrasts(data: StudyData) -> list[OutcomeRow]:
    """Every compared arm's outcome rates against the reference's, per base model · template,
    Boschloo's exact test each, Holm over the table."""
    ref, rows = data.reference_arm, []
    cells = data.trials[["model", "template"]].drop_duplicates().itertuples(index=False)
    kinds = outcomes_of(data)
    for model, template in cells:
        theirs = _cell_classes(data, ref, model, template)
        if not len(theirs):
            continue
        for arm in data.compared_arms:
            mine = _cell_classes(data, arm, model, template)
            if arm == ref or not len(mine):
                continue
            for kind in kinds:
                (k, n), (rk, rn) = counts(mine, kind), counts(theirs, kind)
                p = exact_p(k, n, rk, rn)
                rows.append(OutcomeRow(arm, ref, model, template, kind, k, n, rk, rn, p))
    adjusted = inference.holm([r.p_value for r in rows]) if rows else []
    return [replace(r, p_holm=float(p)) for r, p in zip(rows, adjusted, strict=True)]
