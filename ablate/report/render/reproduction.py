"""A reproduction: a published paper's findings, declared by the studies that test them, tested on
their results together. Written beside the studies' own reports (`OUT/<study>/`): one claims
table (tables/claims.md|tex|csv, through the same render path as every table) and a page
(report.md, report.html) that links each study's report."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from ablate.factors.finding import Finding
from ablate.report.claims.paper import finding_claims
from ablate.report.claims.rules import NOT_TESTABLE, NOT_TESTED, Claim
from ablate.report.claims.sentences import finding_sentences
from ablate.report.data.load import StudyData
from ablate.report.render.blocks import (
    Heading,
    Page,
    TableBlock,
    findings_box,
    opening,
    written_at,
)
from ablate.report.render.build import write_page
from ablate.report.render.claim_tables import findings_table


def with_results(studies: Mapping[str, StudyData | None]) -> dict[str, StudyData | None]:
    """A study counts as having results when at least one of its trials finished."""
    return {n: d if d is not None and len(d.complete()) else None for n, d in studies.items()}


def _summary(findings: Sequence[Finding], studies: Mapping[str, StudyData | None]) -> str:
    missing = [name for name, data in studies.items() if data is None]
    text = (
        f"{len(findings)} findings declared by {len(studies)} studies, each tested on its "
        "study's results on the pair of arms that differs in its factor only: a finding on an "
        "eval pass rate about the task (seeds × problems, the headline's crossed contrast), one "
        "on a training metric over seeds (each row's reading says which); the directional "
        "findings Holm-adjusted together, supported or contradicted only when the exact "
        "sign-flip test over seeds agrees with the t test (up to 10 seeds), equivalence by the "
        "90% interval against the printed margin (TOST), a contradiction only beyond the margin; "
        "a pair whose factor barely acts in the run is not testable at this setting."
    )
    return text + (f" Studies without results: {', '.join(missing)}." if missing else "")


def _sections(claims: list[Claim]) -> dict[str, list[str]]:
    decided = finding_sentences(claims)
    untested = [f"{c.id}: {c.note}." for c in claims if c.verdict == NOT_TESTED]
    idle = [f"{c.id}: {c.note}." for c in claims if c.verdict == NOT_TESTABLE and not c.few_seeds]
    few = [f"{c.id} ({c.statement}): {c.note}." for c in claims if c.few_seeds]
    family = sum(math.isfinite(c.p_holm) for c in claims)
    return {
        "Decided (supported, equivalent or contradicted)": decided
        or [f"No finding is decided ({family} directional tests)."],
        "Not testable at this number of seeds (the exact test cannot agree)": few,
        "Not testable at this setting": idle,
        "Not tested": untested,
    }


def write_reproduction(
    findings: Sequence[Finding], studies: Mapping[str, StudyData | None], folder: Path
) -> Path:
    """`findings` tested on `studies` (study name -> its data, None without results); the
    page's links point at the studies' reports in `folder/<study>/`."""
    reported = {name: name for name, data in studies.items() if data is not None}
    studies = with_results(studies)
    claims = finding_claims(findings, studies)
    title = f"Reproduction: {', '.join(studies)}"
    table = findings_table(claims)
    page = Page(
        title,
        [
            *opening(title, written_at(), _summary(findings, studies), reported),
            findings_box(_sections(claims)),
            Heading(table.title),
            TableBlock(table),
        ],
    )
    folder.mkdir(parents=True, exist_ok=True)
    write_page(page, folder)
    return folder
