"""Claims as tables, one builder per kind, all from the one `rules.Claim` record: the tutorial's
claims tested on a study, the analytic claims, and a reproduction's paper findings."""

from __future__ import annotations

import math

from ablate.report.claims.analytic import analytic_claims
from ablate.report.claims.arms import ACTS_MIN
from ablate.report.claims.rules import EXACT_SEEDS_MAX, Claim, verdict_text
from ablate.report.claims.tutorial import evaluate_claims
from ablate.report.data import numbers
from ablate.report.data.load import StudyData
from ablate.report.data.table import Table, TableSpec
from ablate.report.stats import inference


def _claim_rows(claims: list[Claim], *, analytic: bool) -> list[dict]:
    """An analytic claim's estimate is a number computed from the loss, with no interval and
    no Holm p (it is not tested)."""
    rows = []
    for c in claims:
        row = dict(claim=c.id, statement=c.statement, statistic=c.statistic, n=int(c.n))
        estimate = inference.Estimate(c.value, c.low, c.high, int(c.n))
        row |= {"estimate": float(c.value) if analytic else estimate, "p": c.p_value}
        if not analytic:
            row |= {"p exact": c.p_exact, "p (Holm)": c.p_holm, "p exact (Holm)": c.p_exact_holm}
            row |= {"margin ±": _margin(c), "reading": c.reading or "–"}
        rows.append(row | dict(verdict=verdict_text(c), arms=c.arms, note=c.note))
    return rows


def _p(p: float) -> str:
    return numbers.p_value(p) if math.isfinite(p) else "—"


def _margin(c: Claim) -> str:
    return f"{c.margin:g}" if c.margin is not None else "–"


#: The verdict rule as the claims and findings tables state it.
VERDICTS = (
    "A claim on an eval pass rate is about the task: its interval, p and df are the headline's "
    "crossed seeds × problems contrast (reading 'task'); a training metric has no problem "
    "dimension and is read over seeds ('seed-level'). 'supported': Holm-adjusted p < 0.05 (once, "
    "over the directional claims tested here) with the estimate in the predicted direction and, "
    f"up to {EXACT_SEEDS_MAX} seeds, the exact sign-flip test of the per-seed differences (p "
    "exact, Holm-adjusted "
    "the same way) below 0.05 too; 'equivalent within ±δ': the 90% interval lies "
    "inside the margin δ declared before the results (TOST; a claim of no effect holds so); "
    "'contradicted' only when the 95% interval lies beyond the margin on the side opposite to "
    "the prediction (beyond ±δ for a claim of no effect; 0 where the scale has no margin, –); "
    "otherwise 'inconclusive'. 'not testable at n seeds': the t test decides but the exact test "
    "cannot (its smallest p is 2/2^n: 0.0625 at 5 seeds). 'not testable at this setting': too "
    "few seeds, no variance, a "
    f"factor that acts on under {ACTS_MIN:.0%} of its tokens or samples, or a test that cannot "
    "reach p < 0.05; 'not tested' says what is missing."
)


def claims_table(data: StudyData) -> Table:
    """The tutorial's empirical claims tested on the study."""
    caption = (
        "The papers' claims tested on this study's data (N = seeds unless stated), estimate "
        f"[95% interval]. {VERDICTS}"
    )
    return Table(caption, _claim_rows(evaluate_claims(data), analytic=False))


def analytic_table(data: StudyData) -> Table:
    """Properties of the loss computed from the presets (no training)."""
    caption = (
        "Analytic: properties of the loss computed from the presets, true by construction "
        "whatever the data; not empirical evidence."
    )
    return Table(caption, _claim_rows(analytic_claims(data), analytic=True))


def findings_table(claims: list[Claim]) -> Table:
    """A reproduction's paper findings beside the paper's words: one row per finding."""
    rows = []
    for c in claims:
        value = numbers.estimate(c.value, c.low, c.high, sign=True)
        rows.append(
            {
                "finding": c.id,
                "paper": c.source,
                "tested here": c.statement,
                "Δ [95% CI]": value if math.isfinite(c.value) else "—",
                "seeds": c.n,
                "p (Holm)": _p(c.p_holm),
                "p exact (Holm)": _p(c.p_exact_holm),
                "margin ±": _margin(c),
                "verdict": verdict_text(c),
                "mechanism (arm vs reference)": c.note,
                "reading": c.reading or "–",
            }
        )
    family = sum(math.isfinite(c.p_holm) for c in claims)
    caption = (
        "A paper's findings tested on the studies that declare them: Δ = arm − reference on the "
        "finding's measure [95% interval], about the task for an eval pass rate (seeds × problems, "
        "the headline's crossed contrast), paired by seed for a training metric (reading); "
        "p (Holm) over the "
        f"{family} directional findings tested here (a finding of no effect is judged by its "
        f"intervals, no Holm p: —). {VERDICTS} Mechanism: the training metric that should "
        "explain the effect, arm vs reference (mean over steps, then seeds). The paper column "
        "gives the paper's words (it reports no seeds or intervals)."
    )
    return Table(caption, rows, name="claims", heading="A paper's findings tested here")


TABLES = (
    TableSpec(name="claims", build=claims_table),
    TableSpec(name="analytic", build=analytic_table),
)
