"""The report's tables registry, like `figures.FIGURES`: every table a study's report can hold,
in the report's order, each declared once by a `TableSpec` in the `TABLES` of the module that
builds it (headline, curves, claims, secondary). Adding a table to one of those modules is
writing its builder and its `TableSpec` there; `build_tables` builds every table that
applies, in the declared order (`[s.name for s in TABLES]` lists them).
"""

from __future__ import annotations

from dataclasses import dataclass

from ablate.report.claims.sentences import findings
from ablate.report.claims.tutorial import evaluate_claims
from ablate.report.curves import section
from ablate.report.data.load import StudyData
from ablate.report.data.table import Table, TableSpec
from ablate.report.render import (
    budget,
    checkpoints,
    claim_tables,
    elicited,
    headline,
    paper,
    secondary,
)
from ablate.report.stats import contrasts as cx


def _registry(*declared: tuple[TableSpec, ...]) -> tuple[TableSpec, ...]:
    specs = sorted((s for group in declared for s in group), key=lambda s: s.order)
    for key in ("name", "order"):
        seen = [getattr(s, key) for s in specs]
        twice = sorted({v for v in seen if seen.count(v) > 1})
        if twice:
            raise ValueError(f"report tables declared twice with the same {key}: {twice}")
    return tuple(specs)


TABLES = _registry(
    paper.TABLES,
    headline.TABLES,
    budget.TABLES,
    elicited.TABLES,
    checkpoints.TABLES,
    section.TABLES,
    claim_tables.TABLES,
    secondary.TABLES,
)


@dataclass
class Built:
    findings: dict[str, list[str]]
    tables: list[Table]


def report_findings(data: StudyData) -> dict[str, list[str]]:
    """The report's opening sentences by section, the curves' before the caveats."""
    steps, tokens = cx.headline_contrasts(data), cx.token_contrasts(data)
    found = findings(data, steps, tokens, cx.replicate_contrasts(data), evaluate_claims(data))
    if elicited.has_elicitation(data):
        caveats = found.pop("Caveats")
        found |= {"Gains over the best-elicited base": elicited.elicited_sentences(data)}
        found["Caveats"] = caveats
    if section.has_curves(data):
        caveats = found.pop("Caveats")
        found |= {"Compute–performance curves": section.curve_sentences(data), "Caveats": caveats}
    return found


def build_tables(data: StudyData) -> Built:
    """Every table that applies to the study, in the registry's order, and the findings."""
    tables = [spec.make(data) for spec in TABLES if spec.applies(data)]
    return Built(report_findings(data), tables)
