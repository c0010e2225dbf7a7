"""`build_report`: a study's results store → `reports/<study>/` (report.md, report.html,
tables/, figures/), also attached to the study's parent run there. A page (`Page`: a study's
report, or a reproduction's) is written as report.md and report.html, one self-contained file
(figures inlined as base64 PNG, nothing fetched)."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ablate import tracking
from ablate.report.data.load import StudyData, load_study_data
from ablate.report.data.table import Table
from ablate.report.render import formats, paper
from ablate.report.render.figures import LEAD, caption, write_figures
from ablate.report.render.multiples import check_axis
from ablate.report.render.tables import build_tables
from ablate.report.stats import contrasts as cx
from ablate.study.study import Study

# Reads on a phone (390 px) as on a desktop: wide tables scroll inside their own box, figures
# shrink to the page, long words break; tests/test_browser.py checks there is no page overflow.
CSS = (
    "body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 0.75em;"
    "overflow-wrap:anywhere}table{border-collapse:collapse;font-size:12px;margin:1em 0}"
    "td,th{border:1px solid #ccc;padding:2px 6px;overflow-wrap:normal}"
    "caption{text-align:left;font-size:12px;color:#333;caption-side:bottom}"
    ".findings{background:#f6f8fa;padding:0.5em 1.5em;border-left:4px solid #3b73b9}"
    ".note{font-size:11px;color:#555}.scroll{overflow-x:auto;max-width:100%}"
    "figure{margin:1em 0}img{max-width:min(640px,100%);height:auto}"
)


@dataclass
class Page:
    title: str
    summary: str
    findings: dict[str, list[str]]
    tables: list[Table]
    figures: list[Path] | None = None
    """PNGs under the page's figures/ folder; None: a page without a figures section."""
    lead: list[Path] = field(default_factory=list)
    """PNGs under figures/ shown right after the findings, before every table (each a name
    of `figures.LEAD`, which gives its heading)."""
    links: dict[str, str] = field(default_factory=dict)
    """label -> a folder beside the page holding another report (its report.md / .html)."""
    tab: str = ""
    """The HTML page's <title> (default: the title)."""


def _summary(data: StudyData) -> str:
    t = data.trials
    done = int(t["complete"].sum())
    seeds = sorted(set(t["seed"]))
    return (
        f"{estimand(data)} {len(t)} planned trials, {done} finished, {len(t) - done} "
        f"diverged/failed/missing; reference arm `{data.reference_arm}`; seeds {seeds}. "
        f"Primary comparison: {data.primary}; every other table is secondary. Each contrast is "
        "different, equivalent within the margin, or inconclusive; inconclusive is a result, "
        "not a failure (calibration: `python -m devtools calibrate`)."
    )


def estimand(data: StudyData) -> str:
    """What the numbers are about, in one or two sentences."""
    rows = [r for r in cx.headline_contrasts(data) if r.reading == cx.TASK]
    problems = max((r.problems for r in rows), default=0)
    if not problems:
        return (
            "Estimand: the study's eval problems as fixed (no per-problem records): intervals "
            "cover the mean over these problems, not the task."
        )
    k = f", {data.eval_samples} samples each" if data.eval_samples else ""
    return (
        f"Estimand: {problems} problems of {data.task or 'the task'}'s eval split{k}, treated "
        "as a sample of the task, and the seeds as a sample of training runs: intervals and tests "
        "account for both (crossed seed × problem analysis); the fixed-problem reading is "
        "labelled where shown."
    )


def _findings_markdown(found: dict[str, list[str]]) -> list[str]:
    lines = ["## Findings", ""]
    for section, sentences in found.items():
        if sentences:
            lines += [f"**{section}**", "", *[f"- {formats.markdown_text(s)}" for s in sentences]]
            lines.append("")
    return lines


def write_markdown(page: Page, folder: Path) -> Path:
    lines = [f"# {page.title}", "", f"_{datetime.now(UTC):%Y-%m-%d %H:%M} UTC_", ""]
    lines += [formats.markdown_text(page.summary), ""]
    if page.links:
        lines += [" · ".join(f"[{k}]({v}/report.md)" for k, v in page.links.items()), ""]
    lines += _findings_markdown(page.findings)
    for png in page.lead:
        lines += [f"## {LEAD[png.stem]}", "", _figure_markdown(png), ""]
    for table in page.tables:
        lines += [f"## {table.title}", "", formats.to_markdown(table)]
    if page.figures is not None:
        lines += ["## Figures", ""]
        lines += [_figure_markdown(p) + "\n" for p in page.figures]
    path = folder / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def _figure_markdown(png: Path) -> str:
    return f"![{formats.markdown_text(caption(png))}](figures/{png.name})"


def _findings_html(found: dict[str, list[str]]) -> str:
    parts = ["<div class='findings'><h2>Findings</h2>"]
    for section, sentences in found.items():
        if sentences:
            items = "".join(f"<li>{html.escape(s)}</li>" for s in sentences)
            parts.append(f"<h3>{html.escape(section)}</h3><ul>{items}</ul>")
    return "".join(parts) + "</div>"


def _figure_html(png: Path) -> str:
    encoded = base64.b64encode(png.read_bytes()).decode()
    text = html.escape(caption(png), quote=True)
    return (
        f"<figure><img alt='{text}' src='data:image/png;base64,{encoded}'>"
        f"<figcaption>{text}</figcaption></figure>"
    )


def _figures_html(figures: list[Path]) -> list[str]:
    return ["<h2>Figures</h2>", *map(_figure_html, figures)]


def write_html(page: Page, folder: Path) -> Path:
    """One self-contained file: figures inlined as base64 PNG."""
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width,initial-scale=1'>",
        f"<title>{html.escape(page.tab or page.title)}</title>",
        f"<style>{CSS}</style></head><body><h1>{html.escape(page.title)}</h1>",
        f"<p>{html.escape(page.summary)}</p>",
    ]
    if page.links:
        links = (
            f"<a href='{html.escape(v)}/report.html'>{html.escape(k)}</a>"
            for k, v in page.links.items()
        )
        parts.append(f"<p>{' · '.join(links)}</p>")
    parts.append(_findings_html(page.findings))
    for png in page.lead:
        parts += [f"<h2>{html.escape(LEAD[png.stem])}</h2>", _figure_html(png)]
    for table in page.tables:
        parts += [f"<h2>{html.escape(table.title)}</h2>", formats.to_html(table)]
    if page.figures is not None:
        parts += _figures_html(page.figures)
    path = folder / "report.html"
    path.write_text("".join(parts) + "</body></html>\n")
    return path


def write_page(page: Page, folder: Path) -> None:
    """The page's tables under folder/tables/ (Markdown, LaTeX, CSV), then its two files."""
    for table in page.tables:
        formats.write_table(table, folder / "tables")
    write_markdown(page, folder)
    write_html(page, folder)


def write_report(data: StudyData, folder: Path, curve_axis: str | None = None) -> Path:
    """The study's report in `folder`: tables/ (each table, and paper.tex: the compact headline
    table with the full ones as appendix tables), figures/, report.md and report.html.
    `curve_axis`: the learning curves' x axis (`multiples.AXES`; default: the compute curves')."""
    folder.mkdir(parents=True, exist_ok=True)
    built = build_tables(data)
    figures = write_figures(data, folder / "figures", curve_axis)
    lead = [p for p in figures if p.stem in LEAD]
    page = Page(
        title=f"Report: {data.name}",
        summary=_summary(data),
        findings=built.findings,
        tables=built.tables,
        figures=[p for p in figures if p not in lead],
        lead=lead,
        tab=data.name,
    )
    write_page(page, folder)
    (folder / "tables" / "paper.tex").write_text(paper.paper_tex(built.tables))
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
) -> StudyData:
    """`build_report`'s work: load the study's results, write `out_dir/<study>/`, attach it to
    the study's parent run; returns the data (a reproduction tests its findings on it)."""
    check_axis(curve_axis)  # before reading anything
    uri = tracking_uri or tracking.default_uri(results_dir)
    data = load_study_data(study, results_dir, uri)
    folder = write_report(data, Path(out_dir) / study.name, curve_axis)
    attach_report(uri, study.name, folder)
    return data
