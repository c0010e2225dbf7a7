"""The report's tables registry, like `figures.FIGURES`: every table a study's report can hold,
each declared once by a `TableSpec` in the `TABLES` of the module that builds it (headline,
configuration, curves, claims, secondary, ...), in the order and under the headings of the
report's section list (`sections.SECTIONS`). A table no section places, or a section naming a
table nobody registered, is refused here, when the report is imported. `build_tables` builds
every table that applies, in the sections' order (`[s.name for s in TABLES]` lists them), and
the findings, by group in `sections.FINDING_GROUPS`' order.
"""

from __future__ import annotations

from dataclasses import dataclass

from ablate.report.claims.sentences import caveats, findings
from ablate.report.claims.tutorial import evaluate_claims
from ablate.report.curves import section
from ablate.report.data.load import StudyData
from ablate.report.data.table import Table, TableSpec
from ablate.report.render import (
    budget,
    checkpoints,
    claim_tables,
    configuration,
    elicited,
    headline,
    paper,
    robustness,
    secondary,
    survival,
    took_effect,
)
from ablate.report.render.sections import (
    FINDING_GROUPS,
    SECTIONS,
    TABLE,
    declaration_errors,
    table_names,
)
from ablate.report.stats import contrasts as cx


def _registry(*declared: tuple[TableSpec, ...]) -> tuple[TableSpec, ...]:
    """The specs in the section list's order; ValueError when a name is declared twice or the
    specs and the section list disagree."""
    specs = [s for group in declared for s in group]
    names = [s.name for s in specs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"report tables declared twice with the same name: {twice}")
    errors = declaration_errors(names)
    if errors:
        raise ValueError("; ".join(errors))
    by_name = {s.name: s for s in specs}
    return tuple(by_name[n] for n in table_names())


TABLES = _registry(
    paper.TABLES,
    configuration.TABLES,
    took_effect.TABLES,
    headline.TABLES,
    budget.TABLES,
    robustness.TABLES,
    elicited.TABLES,
    checkpoints.TABLES,
    survival.TABLES,
    section.TABLES,
    claim_tables.TABLES,
    secondary.TABLES,
)
_SPECS = {s.name: s for s in TABLES}


@dataclass
class Built:
    findings: dict[str, list[str]]
    tables: list[Table]


def _finding_groups(data: StudyData) -> dict[str, dict[str, list[str]]]:
    """Each group of `sections.FINDING_GROUPS`: its sentences under their headings."""
    steps, tokens = cx.headline_contrasts(data), cx.token_contrasts(data)
    verdicts = findings(data, steps, tokens, cx.replicate_contrasts(data), evaluate_claims(data))
    groups = {"verdicts": verdicts, "caveats": {"Caveats": caveats(data)}}
    groups["elicited"] = (
        {"Gains over the best-elicited base": elicited.elicited_sentences(data)}
        if elicited.has_elicitation(data)
        else {}
    )
    groups["curves"] = (
        {"Compute–performance curves": section.curve_sentences(data)}
        if section.has_curves(data)
        else {}
    )
    return groups


def report_findings(data: StudyData) -> dict[str, list[str]]:
    """The report's opening sentences under their headings, group by group in the declared
    order (`sections.FINDING_GROUPS`: the caveats last)."""
    groups = _finding_groups(data)
    return {head: said for name in FINDING_GROUPS for head, said in groups[name].items()}


def build_tables(data: StudyData) -> Built:
    """Every table that applies to the study, in the sections' order under their headings,
    and the findings."""
    tables = [
        _SPECS[s.name].make(data, s.heading)
        for s in SECTIONS
        if s.kind == TABLE and _SPECS[s.name].applies(data)
    ]
    return Built(report_findings(data), tables)
