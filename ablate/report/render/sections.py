"""The report's sections, in the order a reader meets them, each with its heading: the one
place that orders a study's report. Reordering the report is reordering `SECTIONS`; a new
table is a builder and its `TableSpec` beside it (`render.tables` collects them) and a line
here. `render.tables` refuses a registered table that no section names, or a section naming a
table that is not registered, when it is imported.

`build.study_page` walks the list once into the page's blocks, which every writer formats
(report.md, report.html, and tables/paper.tex from the same tables in the same order). A
section that does not apply to a study (a table whose `TableSpec.applies` is false, a figure
that was not drawn) is left out, heading and all.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Where a section belongs on the page: the report opens with its first-screen sections (the
#: results paragraph: findings, the forest plot, the compact headline) and holds every
#: appendix section below a fold (`blocks.Fold`: HTML `<details>`, the Markdown appendix).
FIRST_SCREEN, APPENDIX = "first screen", "appendix"

#: What a section shows: the findings (the opening sentences, by group), one figure by name
#: (`figures.PANELS` or `figures.FIGURES`), one table by name (`render.tables.TABLES`), or
#: every figure no FIGURE section shows.
FINDINGS, FIGURE, TABLE, FIGURES = "findings", "figure", "table", "figures"


@dataclass(frozen=True)
class Section:
    name: str
    """The table's or figure's name (its file name), or the findings' / figures' own."""
    heading: str
    """The report's heading for it, written for people."""
    kind: str = TABLE
    screen: str = APPENDIX


SECTIONS: tuple[Section, ...] = (
    Section("findings", "Findings", FINDINGS, FIRST_SCREEN),
    Section("forest_plot", "Every contrast, with its interval and verdict", FIGURE, FIRST_SCREEN),
    Section("headline", "Effects at a glance", screen=FIRST_SCREEN),
    Section("configuration", "Arms and what they change"),
    Section("took_effect", "Did each factor take effect?"),
    Section("offpolicy_diagnostics", "Train–inference mismatch and the corrections"),
    Section("main", "Final pass@1 and every contrast to the reference"),
    Section("sequential", "Sequential looks"),
    Section("elicited_base", "Gains over the best-elicited base"),
    Section("controls", "Live controls: A/A, positive and graded"),
    Section("robustness", "Do the verdicts survive the eval recipe?"),
    Section("robustness_recipes", "Verdicts under each eval recipe"),
    Section("variance_budget", "Where the variance comes from"),
    # the curves are a headline too: before the contrasts at equal tokens
    Section("compute_curves", "Compute–performance curves"),
    Section("compute_curve_contrasts", "Compute curves against the reference"),
    Section("equal_tokens", "Contrasts at equal generated tokens"),
    Section("best_checkpoint", "Best checkpoint chosen on the selection split"),
    Section("survival", "Trials per arm: finished, diverged, failed"),
    Section("incomplete", "Trials that did not finish"),
    Section("measures", "Further measures: pass@k, cost, sample efficiency"),
    Section("outcomes", "How trials ended: divergence and saturation"),
    Section("survivors", "Pass@1 with and without the lost trials"),
    Section("claims", "The papers' claims tested on this study"),
    Section("analytic", "Analytic properties of the losses"),
    Section("dynamics", "Training dynamics"),
    Section("base", "Base models before RL"),
    Section("templates", "Prompt templates on the base models"),
    Section("figures", "Figures", FIGURES),
)

#: The findings' groups, in reading order (`tables.report_findings` fills them): the verdicts
#: of the primary family, the controls, the other family and the claims (`claims.sentences`,
#: each under a heading that names its family or margin), then the gains over the best-elicited
#: base and the compute curves (where the study has them), the caveats last.
FINDING_GROUPS = ("verdicts", "elicited", "curves", "caveats")


def of_kind(kind: str) -> list[Section]:
    return [s for s in SECTIONS if s.kind == kind]


def table_names() -> list[str]:
    """The tables the sections name, in the report's order."""
    return [s.name for s in of_kind(TABLE)]


def declaration_errors(registered: list[str]) -> list[str]:
    """What is wrong between the section list and the tables registered (by name): a table no
    section places, a section naming no registered table, a name used twice."""
    names = [s.name for s in SECTIONS]
    placed = table_names()
    twice = sorted({n for n in names if names.count(n) > 1})
    unplaced = [n for n in registered if n not in placed]
    unknown = [n for n in placed if n not in registered]
    return (
        [f"report section {n!r} is declared twice" for n in twice]
        + [f"report table {n!r} is in no section (render/sections.py)" for n in unplaced]
        + [f"report section {n!r} names no registered table" for n in unknown]
    )
