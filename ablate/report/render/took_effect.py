"""The report's "did the factor take effect?" table (`stats.took_effect`)."""

from __future__ import annotations

from ablate.report.data.load import StudyData
from ablate.report.data.table import Table, TableSpec
from ablate.report.stats.took_effect import (
    INERT_SHARE,
    NOT_TESTABLE,
    diagnostics,
    factor_shares,
)


def took_effect_table(data: StudyData) -> Table:
    rows = [
        {
            "arm": r["arm"],
            "factor": r["factor"],
            "share changed": f"{r['share changed']:.1%}",
            "verdict": r["verdict"],
        }
        for r in factor_shares(data)
    ]
    caption = (
        "Share of training tokens each differing factor changed (from the logged metrics); "
        f"under {INERT_SHARE:.0%} it is inert, and an arm whose every differing factor is inert "
        f"is {NOT_TESTABLE}: its contrast tests nothing that ran."
    )
    return Table(caption, rows)


def _applies(data: StudyData) -> bool:
    return bool(factor_shares(data))


def diagnostics_table(data: StudyData) -> Table:
    shares = ("mismatched", "reweighted", "masked", "clipped")
    rows = [
        {k: (v if k == "arm" else _share(v) if k in shares else _num(v, k)) for k, v in row.items()}
        for row in diagnostics(data)
    ]
    caption = (
        "Train–inference mismatch and what each correction did, over every training step of the "
        "arm's trials (means; |Δ log p| max: the largest). |Δ log p|: engine vs trainer log-prob "
        "of the sampled tokens; Pearson p: correlation of their probabilities; k3 KL: sampler to "
        "trainer; mismatched: tokens whose log-probs differ by > 1e-4; reweighted / masked / "
        "clipped: tokens whose loss weight the correction moved off 1, set to 0, or capped; ESS: "
        "effective sample size of the weights (1 = uniform)."
    )
    return Table(caption, rows)


def _share(v: float) -> str:
    return "–" if v != v else f"{v:.1%}"


def _num(v: float, column: str) -> str:
    if v != v:
        return "–"
    return f"{v:.4f}" if column == "Pearson p" else f"{v:.3g}"  # near 1: its digits matter


TABLES = (
    TableSpec(name="took_effect", build=took_effect_table, applies=_applies),
    TableSpec(
        name="offpolicy_diagnostics",
        build=diagnostics_table,
        applies=lambda data: bool(diagnostics(data)),
    ),
)
