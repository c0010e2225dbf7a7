"""The report's "did the factor take effect?" table (`stats.took_effect`)."""

from __future__ import annotations

from ablate.report.data.load import StudyData
from ablate.report.data.table import Table, TableSpec
from ablate.report.stats.took_effect import INERT_SHARE, NOT_TESTABLE, factor_shares


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
        f"under {INERT_SHARE:.0%} the arm's contrast is {NOT_TESTABLE}."
    )
    return Table(caption, rows)


def _applies(data: StudyData) -> bool:
    return bool(factor_shares(data))


TABLES = (TableSpec(name="took_effect", build=took_effect_table, applies=_applies),)
