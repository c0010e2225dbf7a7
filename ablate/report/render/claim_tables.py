"""Claims as tables, one builder per kind, all from the one `rules.Claim` record: the tutorial's
claims tested on a study, the analytic claims, and a reproduction's paper findings."""

from __future__ import annotations

import math

from ablate.report.claims.analytic import analytic_claims
from ablate.report.claims.rules import Claim
from ablate.report.claims.tutorial import evaluate_claims
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
            row["p (Holm)"] = c.p_holm
        rows.append(row | dict(verdict=c.verdict, arms=c.arms, note=c.note))
    return rows


def claims_table(data: StudyData) -> Table:
    """The tutorial's empirical claims tested on the study."""
    caption = (
        "The papers' claims tested on this study's data (N = seeds unless stated). A "
        "verdict is 'supported' when the Holm-adjusted p (over the claims tested here) is "
        "< 0.05 with the estimate in the predicted direction, 'contradicted' when it is "
        "< 0.05 in the opposite direction, otherwise 'inconclusive'; 'not tested' says why."
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
        interval = f"[{c.low:+.3f}, {c.high:+.3f}]" if math.isfinite(c.low) else ""
        value = f"{c.value:+.3f}" if math.isfinite(c.value) else "—"
        rows.append(
            {
                "finding": c.id,
                "paper": c.source,
                "tested here": c.statement,
                "Δ [95% CI]": f"{value} {interval}".strip(),
                "seeds": c.n,
                "p (Holm)": f"{c.p_holm:.3g}" if math.isfinite(c.p_holm) else "—",
                "verdict": c.verdict,
                "mechanism (arm vs reference)": c.note,
            }
        )
    family = sum(math.isfinite(c.p_holm) for c in claims)
    caption = (
        "A paper's findings tested on the studies that declare them: Δ = arm − reference on the "
        "finding's measure, paired by seed [95% t interval]; p (Holm) over the "
        f"{family} directional findings tested here, verdict as for the claims; a finding of no "
        "effect is supported only when its whole interval lies within its margin, contradicted "
        "by a significant difference (no Holm p: —). Mechanism: the training metric that should "
        "explain the effect, arm vs reference (mean over steps, then seeds). The paper column "
        "gives the paper's words (it reports no seeds or intervals)."
    )
    return Table(caption, rows, name="claims")


TABLES = (
    TableSpec(name="claims", build=claims_table, order=90),
    TableSpec(name="analytic", build=analytic_table, order=100),
)
