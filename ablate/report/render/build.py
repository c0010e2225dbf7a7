"""`build_report`: a study's results store → `reports/<study>/` (report.md, report.html,
tables/, figures/), also attached to the study's parent run there. The study's page is built
once, by walking the report's section list (`sections.SECTIONS`) into blocks (`blocks.Page`),
which `writers` format as report.md and report.html and `paper.paper_tex` reads the tables of;
a reproduction's page is written the same way (`write_page`)."""

from __future__ import annotations

from pathlib import Path

from ablate import tracking
from ablate.report.data.load import StudyData, load_study_data
from ablate.report.render import formats, paper
from ablate.report.render import opening as opening_text
from ablate.report.render.blocks import (
    Block,
    Figure,
    Fold,
    Heading,
    Page,
    TableBlock,
    findings_box,
    opening,
    written_at,
)
from ablate.report.render.figures import write_figures
from ablate.report.render.multiples import check_axis
from ablate.report.render.paper_document import write_paper
from ablate.report.render.sections import (
    FIGURE,
    FINDINGS,
    FIRST_SCREEN,
    SECTIONS,
    TABLE,
    Section,
    of_kind,
)
from ablate.report.render.tables import Built, build_tables
from ablate.report.render.writers import write_html, write_markdown
from ablate.study.study import Study


def _summary(data: StudyData) -> str:
    """The opening paragraphs as one text (the estimand first)."""
    return " ".join(opening_text.summary(data))


#: The fold's summary line (HTML) and the Markdown appendix's heading.
APPENDIX = "Appendix: every table and figure"


def write_page(page: Page, folder: Path) -> None:
    """The page's tables under folder/tables/ (Markdown, LaTeX, CSV), then its two files."""
    for table in page.tables:
        formats.write_table(table, folder / "tables")
    write_markdown(page, folder)
    write_html(page, folder)


def _section_blocks(section: Section, built: Built, figures: list[Path]) -> list[Block]:
    """What one section shows of the study: nothing when it does not apply (a table not
    built, a figure not drawn)."""
    heading = Heading(section.heading)
    if section.kind == FINDINGS:
        return [findings_box(built.findings, section.heading)]
    if section.kind == TABLE:
        shown: list[Block] = [TableBlock(t) for t in built.tables if t.name == section.name]
    elif section.kind == FIGURE:
        shown = [Figure(p) for p in figures if p.stem == section.name]
    else:  # FIGURES: every figure no FIGURE section shows, under its heading even if none
        placed = {s.name for s in of_kind(FIGURE)}
        return [heading, *(Figure(p) for p in figures if p.stem not in placed)]
    return [heading, *shown] if shown else []


def study_page(data: StudyData, built: Built, figures: list[Path]) -> Page:
    """The study's report as one sequence of blocks: its opening, then the sections in the
    declared order (`sections.SECTIONS`)."""
    blocks = opening(f"Report: {data.name}", written_at(), opening_text.summary(data), {})
    below: list[Block] = []
    for section in SECTIONS:
        shown = _section_blocks(section, built, figures)
        (blocks if section.screen == FIRST_SCREEN else below).extend(shown)
    return Page(data.name, blocks + ([Fold(APPENDIX, tuple(below))] if below else []))


def write_report(
    data: StudyData, folder: Path, curve_axis: str | None = None, paper_doc: bool = False
) -> Path:
    """The study's report in `folder`: tables/ (each table, and paper.tex: the compact headline
    table with the appendix's tables), figures/, report.md and report.html; with `paper_doc`,
    paper.tex too (a two-column article: `paper_document`).
    `curve_axis`: the learning curves' x axis (`multiples.AXES`; default: the compute curves')."""
    folder.mkdir(parents=True, exist_ok=True)
    figures = write_figures(data, folder / "figures", curve_axis)
    page = study_page(data, build_tables(data), figures)
    write_page(page, folder)
    (folder / "tables" / "paper.tex").write_text(paper.paper_tex(page.tables))
    if paper_doc:
        write_paper(data, folder, figures)
    return folder


def attach_report(uri: str, study_name: str, folder: Path) -> bool:
    """Log the report folder as artifacts `report/` of the study's parent run, if it exists.
    The run's status is left alone: whether the study is finished is the runners' to say."""
    parent = tracking.open_store(uri).find_study(study_name)
    if parent is None:
        return False
    parent.attach(folder, "report")
    return True


def build_report(
    study: Study,
    results_dir: str | Path = "results",
    out_dir: str | Path = "reports",
    tracking_uri: str | None = None,
    curve_axis: str | None = None,
) -> Path:
    """Write `out_dir/<study>/` and attach it to the study's parent run (figures and tables
    included, as artifacts `report/`); returns the folder."""
    report_study(study, results_dir, out_dir, tracking_uri, curve_axis)
    return Path(out_dir) / study.name


def report_study(
    study: Study,
    results_dir: str | Path = "results",
    out_dir: str | Path = "reports",
    tracking_uri: str | None = None,
    curve_axis: str | None = None,
    paper_doc: bool = False,
) -> StudyData:
    """`build_report`'s work: load the study's results, write `out_dir/<study>/`, attach it to
    the study's parent run; returns the data (a reproduction tests its findings on it)."""
    check_axis(curve_axis)  # before reading anything
    uri = tracking_uri or tracking.default_uri(results_dir)
    data = load_study_data(study, results_dir, uri)
    folder = write_report(data, Path(out_dir) / study.name, curve_axis, paper_doc)
    attach_report(uri, study.name, folder)
    return data
