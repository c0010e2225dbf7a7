"""Divergence as its own outcome: a run either diverges (probability q, non-finite weights, no
final eval) or survives with a pass@1 whose task mean is μ, so an arm's mean with a diverged run
counted as 0 is the hurdle (1 − q)·μ. Counting the zeros into Δ mixes the two questions, and
the crossed interval of that mixture does not cover: a few seeds with a 10–20% divergence rate
in one arm often show no divergence at all, so the interval sits on μ_a − μ_r while the truth is
(1 − q_a)μ_a − μ_r (`python -m devtools calibrate --divergence` shows its coverage beside the
survivors' reading). The headline reads the pair instead:

- Δμ among survivors: the crossed contrast on the seeds where BOTH arms survived. Pairing by
  seed keeps the common random numbers (same data order, same eval draws), which remove the
  seed variance the arms share, and reuses the calibrated crossed analysis unchanged; the cost
  is the seeds where only one arm diverged. A per-arm survivors' contrast (each arm over its own
  survivors) would break the pairing and need an unpaired crossed analysis. When divergence does
  not depend on the seed's draw, both estimate μ_a − μ_r; when it does (some data orders make
  both arms diverge), the paired reading is conditional on both surviving, as the caption says.
- Δq: k/n against ref_k/ref_n over the trials with an algorithm outcome, Boschloo's exact test
  (`outcomes.exact_p`, the outcomes table's test), Holm over the table's contrasts.
- The hurdle Δ = (1 − q_a)μ_a − (1 − q_r)μ_r (`hurdle`), shown beside them: a delta-method
  interval from the survivors' crossed SE and Agresti–Caffo rates ((k + 1)/(n + 2)), so that
  0 of 5 diverged still leaves room for a real rate; it covers 0.94–1.00 (conservative at 5
  seeds, near nominal at 10), where the crossed interval of the zeros covered 0.67–0.89 with
  one arm diverging 10–20% of the time. A combined number, not the test.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy import stats as sps

from ablate.report.data.load import StudyData
from ablate.report.stats import crossed, inference
from ablate.report.stats import measures as m
from ablate.report.stats import outcomes as oc
from ablate.report.stats import problems as pr


@dataclass(frozen=True)
class Divergence:
    """One contrast's divergence counts, their exact test and the hurdle Δ."""

    k: int  # diverged trials of the arm
    n: int  # its trials with an algorithm outcome (finished, diverged, saturated)
    ref_k: int
    ref_n: int
    p_value: float  # Boschloo, two-sided; NaN: no test (no divergence in either arm)
    hurdle: inference.Estimate  # (1 − q_a)μ_a − (1 − q_r)μ_r with its delta-method interval
    p_holm: float = float("nan")

    @property
    def counts(self) -> str:
        return f"{self.k}/{self.n} vs {self.ref_k}/{self.ref_n}"

    @property
    def any(self) -> bool:
        return self.k + self.ref_k > 0


def hurdle(
    mean_a, mean_r, k_a, n_a, k_r, n_r, diff_se, df, confidence: float = inference.CONFIDENCE
) -> tuple[np.ndarray, np.ndarray]:
    """The hurdle Δ = (1 − q̂_a)μ̂_a − (1 − q̂_r)μ̂_r and its half-width (broadcast arrays).

    μ̂ are the arms' survivors' means, q̂ = k/n, diff_se and df the survivors' Δ's crossed SE
    and df. Delta method on Δ = s_r·(μ_a − μ_r) + (s_a − s_r)·μ_a (s = 1 − q): the survivors'
    part max(s_a, s_r)·SE(Δμ̂) at Student t's quantile on df, and the rates' part
    μ_a²·Var(q_a) + μ_r²·Var(q_r) at the normal's, each Var(q) at Agresti–Caffo's
    q̃(1 − q̃)/(n + 2), q̃ = (k + 1)/(n + 2), so that a rate of 0/n still carries its
    uncertainty; the two half-widths add in quadrature."""
    k_a, n_a, k_r, n_r = (np.asarray(x, dtype=float) for x in (k_a, n_a, k_r, n_r))
    s_a, s_r = 1 - k_a / n_a, 1 - k_r / n_r
    mean_a = np.where(s_a > 0, mean_a, 0.0)  # every run diverged: no survivors' mean, no term
    mean_r = np.where(s_r > 0, mean_r, 0.0)
    value = s_a * mean_a - s_r * mean_r
    q_a, q_r = (k_a + 1) / (n_a + 2), (k_r + 1) / (n_r + 2)
    rates = mean_a**2 * q_a * (1 - q_a) / (n_a + 2) + mean_r**2 * q_r * (1 - q_r) / (n_r + 2)
    tail = (1 + confidence) / 2
    with np.errstate(invalid="ignore"):
        survivors = sps.t.ppf(tail, df) * np.maximum(s_a, s_r) * np.asarray(diff_se)
        half = np.sqrt(survivors**2 + sps.norm.ppf(tail) ** 2 * rates)
    return value[()], half[()]


def _survivors_mean(data: StudyData, arm: str, cell: tuple[str, str]) -> float:
    """An arm's mean over its surviving seeds (and the problems each has, where per-problem
    records exist): μ̂; NaN when none survived."""
    rates = pr.final_rates(data)
    matrix = pr.cell_matrix(data, rates, arm, *cell, diverged=False) if len(rates) else None
    if matrix is not None and not matrix.empty:
        return float(pr.complete_matrix(matrix).mean())
    values = m.final_value(data.history, "eval/pass_at_1")
    return float(m.by_seed(data, values, arm, *cell).mean())


def _counts(data: StudyData, arm: str, cell: tuple[str, str]) -> tuple[int, int]:
    t = data.trials
    rows = t[(t["arm"] == arm) & (t["model"] == cell[0]) & (t["template"] == cell[1])]
    classes = oc.outcome_class(rows) if len(rows) else pd.Series(dtype=object)
    return oc.counts(classes, oc.DIVERGED)


def contrast_divergence(
    data: StudyData,
    arm: str,
    ref: str,
    cell: tuple[str, str],
    diffs: np.ndarray | None,
    contrast: inference.Contrast,
) -> Divergence:
    """The divergence half of a headline contrast: counts, exact test, hurdle Δ; `diffs` the
    survivors' [n, J] differences (None: per-seed values, read off `contrast`, the paired t)."""
    (k, n), (ref_k, ref_n) = _counts(data, arm, cell), _counts(data, ref, cell)
    mean_a, mean_r = (_survivors_mean(data, x, cell) for x in (arm, ref))
    se, df = float("nan"), float("nan")
    if diffs is not None and np.shape(diffs)[0] >= inference.MIN_SEEDS:
        c = crossed.crossed(diffs)
        se, df = float(c.se), float(c.df)
    elif diffs is None and contrast.n >= inference.MIN_SEEDS:
        se, df = contrast.sd / np.sqrt(contrast.n), contrast.n - 1.0
    value, half = hurdle(mean_a, mean_r, k, max(n, 1), ref_k, max(ref_n, 1), se, df)
    est = inference.Estimate(float(value), float(value - half), float(value + half), min(n, ref_n))
    return Divergence(k, n, ref_k, ref_n, oc.exact_p(k, n, ref_k, ref_n), est)


def with_holm(divergences: list[Divergence | None]) -> list[Divergence | None]:
    """Holm over the table's divergence tests (NaN: no test, not counted)."""
    p = [d.p_value if d is not None else float("nan") for d in divergences]
    adjusted = inference.holm(p) if p else []
    return [
        None if d is None else replace(d, p_holm=float(a))
        for d, a in zip(divergences, adjusted, strict=True)
    ]


def has_divergence(data: StudyData) -> bool:
    """Whether any trial of the study diverged (else the headline looks as without this)."""
    return bool(len(data.trials)) and bool((data.trials["outcome"] == oc.DIVERGED).any())
