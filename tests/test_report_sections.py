"""The report's one order and one page walk: the section list (`render/sections.py`) agrees with
the tables registry, places every finding group once and the caveats last; the page is built
once as blocks, and report.md and report.html show the same headings, lists and tables in the
same order; reordering the section list reorders the report. The report imports neither the
runner nor the trainer."""

from __future__ import annotations

import dataclasses
import html
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from ablate.baselines import baseline
from ablate.report.data.table import Table, TableSpec
from ablate.report.render import build, figures, sections, tables, writers
from ablate.report.render import paper as paper_tables
from ablate.report.render.blocks import (
    Box,
    Bullets,
    Figure,
    Fold,
    Heading,
    Links,
    Page,
    Paragraph,
    Stamp,
    TableBlock,
    walk,
)
from ablate.report.render.latex_text import escape
from ablate.testing import study_data

REF = dataclasses.replace(baseline("grpo"), kl_coef=0.0, minibatches=4)
ALGOS = {"grpo": REF, "better": dataclasses.replace(REF, clip_high=0.28)}


@pytest.fixture(scope="module")
def data():
    """Two arms over 4 seeds, one seed of `better` diverged: findings, caveats, tables, figures."""
    runs = []
    for s in range(4):
        for arm, lift in (("grpo", 0.0), ("better", 0.1)):
            curves = {
                "eval/pass_at_1": {0: 0.5, 5: 0.5 + lift / 2 + 0.01 * s, 10: 0.5 + lift + 0.01 * s},
                "budget/generated_tokens": {5: 5_000, 10: 10_000},
                "entropy/mean": [0.5] * 11,
            }
            runs.append(
                (arm, "m", s, curves, "diverged" if (arm, s) == ("better", 3) else "finished")
            )
    return study_data(runs, algorithms=ALGOS, reference="grpo", equivalence_margin=0.05)


@pytest.fixture(scope="module")
def written(data, tmp_path_factory):
    folder = build.write_report(data, tmp_path_factory.mktemp("report"))
    page = build.study_page(
        data, tables.build_tables(data), sorted((folder / "figures").glob("*.png"))
    )
    return folder, page


def test_every_registered_table_has_a_section_and_every_table_section_a_registered_table():
    registered = [s.name for s in tables.TABLES]
    assert sections.declaration_errors(registered) == []
    assert registered == sections.table_names()  # the registry is in the sections' order
    names = [s.name for s in sections.SECTIONS]
    assert len(names) == len(set(names))
    assert {s.kind for s in sections.SECTIONS} == {
        sections.FINDINGS,
        sections.FIGURE,
        sections.TABLE,
        sections.FIGURES,
    }


def test_the_registry_refuses_a_table_no_section_places_and_a_section_naming_no_table():
    stray = TableSpec(name="stray", build=lambda d: Table("Stray.", []))
    with pytest.raises(ValueError, match="report table 'stray' is in no section"):
        tables._registry(tables.TABLES, (stray,))
    without_main = tuple(s for s in tables.TABLES if s.name != "main")
    with pytest.raises(ValueError, match="report section 'main' names no registered table"):
        tables._registry(without_main)


def test_figure_sections_name_drawn_figures_and_every_section_sits_on_a_screen():
    drawn = set(figures.PANELS) | set(figures.FIGURES)
    assert {s.name for s in sections.of_kind(sections.FIGURE)} <= drawn
    assert {s.screen for s in sections.SECTIONS} <= {sections.FIRST_SCREEN, sections.APPENDIX}
    first = [s.name for s in sections.SECTIONS if s.screen == sections.FIRST_SCREEN]
    assert first == ["findings", "forest_plot", "headline"]  # today's opening, in its order


def test_the_findings_groups_are_declared_once_and_the_caveats_come_last(data, monkeypatch):
    from ablate.factors.eval_spec import CurveSpec

    assert len(set(sections.FINDING_GROUPS)) == len(sections.FINDING_GROUPS)
    assert set(tables._finding_groups(data)) == set(sections.FINDING_GROUPS)
    monkeypatch.setattr(tables.elicited, "elicited_sentences", lambda d: ["Elicited."])
    monkeypatch.setattr(tables.section, "curve_sentences", lambda d: ["Curves."])
    elicitation = pd.DataFrame([{"model": "m"}])  # a row: the study declared a grid
    with_all = dataclasses.replace(data, curves=CurveSpec(), elicitation=elicitation)
    found = tables.report_findings(with_all)
    assert list(found)[-3:] == [
        "Gains over the best-elicited base",
        "Compute–performance curves",
        "Caveats",
    ]
    assert next(iter(found)).startswith("Different (primary") and found["Caveats"]
    assert list(tables.report_findings(data))[-2:] == ["Claims", "Caveats"]


def _md_headings(md: str) -> list[str]:
    return [m.group(2) for m in re.finditer(r"^(#{1,2}) (.*)$", md, re.M)]


def _html_headings(text: str) -> list[str]:
    return [html.unescape(m.group(2)) for m in re.finditer(r"<h([12])>(.*?)</h\1>", text)]


def test_markdown_and_html_show_the_same_headings_lists_and_tables_in_the_same_order(written):
    folder, page = written
    md, text = (folder / "report.md").read_text(), (folder / "report.html").read_text()
    headings = [b.text for b in walk(page.blocks) if isinstance(b, Heading)]
    shown = [
        b.text if isinstance(b, Heading) else b.summary
        for b in walk(page.blocks)
        if isinstance(b, Heading | Fold)
    ]  # the fold's summary: the appendix's heading
    assert _md_headings(md) == _html_headings(text) == shown
    assert [h for h in shown if h not in headings] == [build.APPENDIX]
    assert headings[:3] == [
        "Report: synthetic",
        "Findings",
        "Every contrast, with its interval and verdict",
    ]
    assert headings[-1] == "Figures" and "Trials that did not finish" in headings
    lists = [b.title for b in walk(page.blocks) if isinstance(b, Bullets)]
    assert lists[-1] == "Caveats" and len(lists) >= 2
    html_lists = [html.unescape(t) for t in re.findall(r"<h3>(.*?)</h3>", text)]
    md_lists = [t for t in re.findall(r"^\*\*(.*)\*\*$", md, re.M) if t in lists]
    assert md_lists == html_lists == lists
    names = [t.name for t in page.tables]
    assert names[:3] == ["headline", "configuration", "main"]
    assert sorted(names) == sorted(p.stem for p in (folder / "tables").glob("*.csv"))
    for out, esc in ((md, str), (text, html.escape)):  # each under its heading, in order
        at = [out.index(esc(t.title)) for t in page.tables]
        assert at == sorted(at)
    paper = (folder / "tables" / "paper.tex").read_text()
    labels = re.findall(r"\\label\{tab:(\w+)\}", paper)
    # the LaTeX page: the headline, the appendix's tables in their order, the rest by file
    assert labels[0] == "headline"
    assert labels[1:] == [n for n in paper_tables.APPENDIX_TABLES if n in labels]
    for table in page.tables:
        if table.name not in labels and table.rows:
            assert escape(f"tables/{table.name}.tex") in paper, table.name


def test_the_writers_format_every_block_in_the_pages_order(tmp_path):
    png = tmp_path / "forest_plot.png"
    png.write_bytes(b"\x89PNG")
    said = [  # each block with the words both writers must show for it
        (Heading("Hone", 1), ["Hone"]),
        (Stamp("Stwo"), ["Stwo"]),
        (Paragraph("Pthree"), ["Pthree"]),
        (Links({"Lfour": "other"}), ["Lfour"]),
        (
            Box((Heading("Bfive"), Bullets("Usix", ("Iseven", "Ieight")))),
            ["Bfive", "Usix", "Iseven", "Ieight"],
        ),
        (Heading("Hnine"), ["Hnine"]),
        (TableBlock(Table("Cten.", [{"arm": "Releven"}], name="t")), ["Cten.", "Releven"]),
        (Figure(png), ["Every contrast: Δ pass@1"]),
    ]
    for order in (said, said[::-1]):  # the writers follow the page, whatever its order
        page = Page("tab", [block for block, _ in order])
        words = [w for _, ws in order for w in ws]
        for out in (writers.markdown(page), writers.page_html(page)):
            at = [out.index(w) for w in words]
            assert at == sorted(at)
    page = Page("tab", [block for block, _ in said])
    assert "a &lt;b \\| c" in writers.markdown(Page("t", [Paragraph("a <b | c")]))
    assert "<p><em>Stwo</em></p>" in writers.page_html(page)  # the date, in both files
    assert "_Stwo_" in writers.markdown(page)


def test_reordering_the_section_list_reorders_the_report(data, written, monkeypatch):
    _, page = written
    moved = [s for s in sections.SECTIONS if s.name == "configuration"]
    rest = [s for s in sections.SECTIONS if s.name != "configuration"]
    monkeypatch.setattr(build, "SECTIONS", (*rest[:-1], *moved, rest[-1]))
    reordered = build.study_page(data, tables.build_tables(data), [])
    names = [t.name for t in reordered.tables]
    assert names[-1] == "configuration" and sorted(names) == sorted(t.name for t in page.tables)


def test_the_report_imports_neither_the_runner_nor_the_trainer():
    """The report reads what the store wrote: importing it loads no module that trains (the
    runner, the trial's trainer, torch), only the study's definition and the trials' identity."""
    code = (
        "import sys; import ablate.report.render.build, ablate.report.render.reproduction; "
        "print(' '.join(sorted(sys.modules)))"
    )
    root = Path(__file__).resolve().parent.parent
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    ).stdout.split()
    trains = [m for m in loaded if m == "torch" or m.startswith(("ablate.trial", "ablate.stages"))]
    assert trains == [] and "ablate.study.runner" not in loaded
    assert "ablate.study.identity" in loaded
