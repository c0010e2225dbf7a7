"""One estimand for every claim (statistics.md §6): a claim on an eval pass rate is about the
task, read through the headline's own contrast.

The per-(seed, problem) values of a claim (differences arm − reference, or a claim's own
statistic linearised per seed and problem, claim 6) go through `contrasts.task_contrast`: the
crossed seeds × problems analysis of `stats.crossed`, its 95% interval, its 90% interval for TOST
and its degrees of freedom, exactly as the headline reads an arm against the reference; the
arm × problem interaction widens the interval as it does there. Matrices come from the per-sample
eval records as the headline builds them (`stats.problems`: each trial's final eval, a diverged
trial as a row of zeros, `measures.DIVERGED_RULE`); pass@k with k > 1 per problem is the unbiased
estimator 1 − C(K − c, k) / C(K, k) of its K samples, c correct. Without per-problem records (or
with fewer than 2 problems) a claim falls back to seed-level, and says so in its reading.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
from scipy import special

from ablate.report.claims import rules
from ablate.report.data.load import StudyData
from ablate.report.data.memo import per_study
from ablate.report.stats import contrasts, crossed
from ablate.report.stats import problems as pr

_PASS_AT = re.compile(r"eval/pass_at_(\d+)")


def pass_k(measure: str) -> int | None:
    """k of an eval pass@k measure ("eval/pass_at_8" -> 8), None for any other measure."""
    found = _PASS_AT.fullmatch(measure)
    return int(found.group(1)) if found else None


def pass_at_k(correct: np.ndarray, samples: np.ndarray, k: int) -> np.ndarray:
    """Unbiased per-problem pass@k from c correct of K samples (broadcast shapes): 1 −
    C(K − c, k) / C(K, k); NaN where K < k (too few samples to estimate it)."""
    c, s = np.asarray(correct, dtype=float), np.asarray(samples, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        miss = special.comb(s - c, k) / special.comb(s, k)  # comb(x, k) = 0 for x < k
    return np.where(s >= k, 1.0 - miss, np.nan)


def rates_k(samples: pd.DataFrame, k: int) -> pd.DataFrame:
    """trial_id × problem_id pass@k of the given sample rows (k = 1: the mean correctness)."""
    if not len(samples):
        return pd.DataFrame()
    if k == 1:
        return pr.rates_at(samples)
    correct = samples["correct"].astype(float)
    keys = [samples["trial_id"], samples["problem_id"]]
    c, s = correct.groupby(keys).sum(), correct.groupby(keys).count()
    table = pd.Series(pass_at_k(c.to_numpy(), s.to_numpy(), k), index=c.index).unstack()
    return table.sort_index(axis=1)


@per_study
def final_rates_k(data: StudyData, k: int) -> pd.DataFrame:
    """trial_id × problem_id pass@k at each trial's last eval step (complete trials)."""
    if k == 1:
        return pr.final_rates(data)
    s = data.samples
    if not len(s):
        return pd.DataFrame()
    s = s[s["trial_id"].isin(set(data.complete()["trial_id"]))]
    return rates_k(s[s["step"] == s.groupby("trial_id")["step"].transform("max")], k)


def pair_matrices(
    data: StudyData, rates: pd.DataFrame, arm: str, ref: str, model: str, template: str
) -> tuple[np.ndarray, np.ndarray]:
    """The two arms' [n, J] matrices over the seeds and problems both have (the headline's)."""
    if not len(rates):
        return np.empty((0, 0)), np.empty((0, 0))
    a, b = (pr.cell_matrix(data, rates, x, model, template) for x in (arm, ref))
    return pr.matched(a, b)


def task_reading(d: np.ndarray) -> str:
    """The reading of a task-level claim from its per-(seed, problem) values d [n, J]."""
    n, J = d.shape
    df = float(crossed.crossed(d).df) if n >= 2 else float("nan")
    return f"task: {n} seeds × {J} problems (crossed, df {df:.3g})"


def task_claim(base: rules.Claim, d: np.ndarray, **kw) -> rules.Claim:
    """`base` tested on per-(seed, problem) values d [n, J] about the task: the headline's
    crossed contrast (95% interval, p, 90% TOST interval, df), the exact sign-flip p of the
    per-seed means beside it; its verdict comes from `rules.adjudicate`."""
    d = np.asarray(d, dtype=float)
    contrast, interval90 = contrasts.task_contrast(d, np.zeros_like(d))
    return rules.tested(
        base,
        contrast.diff,
        contrast.p_value,
        seed_values=d.mean(axis=1),  # [n]
        interval90=interval90,
        reading=task_reading(d),
        **kw,
    )


def eval_claim(
    base: rules.Claim, data: StudyData, measure: str, pair: tuple[str, str], cell, **kw
) -> rules.Claim | None:
    """arm − reference on an eval pass@k measure at the final eval, about the task; None when
    the study has no per-problem records for it (the caller reads it seed-level)."""
    k = pass_k(measure)
    if k is None:
        return None
    x, y = pair_matrices(data, final_rates_k(data, k), *pair, *cell)
    if not x.size or x.shape[1] < 2:
        return None
    return task_claim(base, x - y, **kw)
