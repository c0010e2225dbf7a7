"""`build_report`: a study's results store → `reports/<study>/` (report.md, report.html,
tables/, figures/), also attached to the study's parent run there."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ablate import tracking
from ablate.report import contrasts as cx
from ablate.report import render, secondary, tables
from ablate.report.claims import analytic_claims, evaluate_claims, template_contrasts
from ablate.report.curve_tables import curve_section
from ablate.report.figures import write_figures
from ablate.report.findings import findings
from ablate.report.load import StudyData, load_study_data
from ablate.study import Study

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
class Built:
    findings: dict[str, list[str]]
    tables: list[tables.Table]


def build_tables(data: StudyData) -> Built:
    steps, tokens = cx.headline_contrasts(data), cx.token_contrasts(data)
    aa = cx.replicate_contrasts(data)
    claims = evaluate_claims(data)
    out = [
        tables.config_table(data),
        tables.main_table(data, steps),
        tables.compute_table(data, tokens),
    ]
    if aa:
        out.append(tables.aa_table(aa))
    out += [
        tables.survival_table(data),
        tables.incomplete_table(data),
        secondary.measures_table(data),
        secondary.claims_table(claims),
        secondary.claims_table(analytic_claims(data), "analytic"),
        secondary.dynamics_table(data),
        secondary.base_table(data),
    ]
    contrasts = template_contrasts(data.passk) if len(data.passk) else None
    if contrasts is not None and len(contrasts):
        out.append(secondary.templates_table(contrasts))
    curve_tables, curve_sentences = curve_section(data)
    found = findings(data, steps, tokens, aa, claims)
    if curve_tables:
        out[2:2] = curve_tables  # after the headline: the curves are a headline too
        caveats = found.pop("Caveats")
        found |= {"Compute–performance curves": curve_sentences, "Caveats": caveats}
    return Built(found, out)


def _summary(data: StudyData) -> str:
    t = data.trials
    done = int(t["complete"].sum())
    seeds = sorted(set(t["seed"]))
    return (
        f"{len(t)} planned trials, {done} finished, {len(t) - done} diverged/failed/missing; "
        f"reference arm `{data.reference_arm}`; seeds {seeds}. The seed is the unit of "
        "inference: intervals are Student-t over seeds, contrasts paired by seed, marks "
        "Holm-adjusted (calibration: `ablate calibrate`). Inconclusive is a result, not a failure."
    )


def _findings_markdown(found: dict[str, list[str]]) -> list[str]:
    lines = ["## Findings", ""]
    for section, sentences in found.items():
        if sentences:
            lines += [f"**{section}**", "", *[f"- {s}" for s in sentences], ""]
    return lines


def write_markdown(data: StudyData, built: Built, figures: list[Path], folder: Path) -> Path:
    lines = [f"# Report: {data.name}", "", f"_{datetime.now(UTC):%Y-%m-%d %H:%M} UTC_", ""]
    lines += [_summary(data), "", *_findings_markdown(built.findings)]
    for table in built.tables:
        lines += [f"## {table.name}", "", render.to_markdown(table)]
    lines += ["## figures", ""]
    lines += [f"![{p.stem}](figures/{p.name})" for p in figures]
    path = folder / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def _findings_html(found: dict[str, list[str]]) -> str:
    parts = ["<div class='findings'><h2>Findings</h2>"]
    for section, sentences in found.items():
        if sentences:
            items = "".join(f"<li>{html.escape(s)}</li>" for s in sentences)
            parts.append(f"<h3>{html.escape(section)}</h3><ul>{items}</ul>")
    return "".join(parts) + "</div>"


def write_html(data: StudyData, built: Built, figures: list[Path], folder: Path) -> Path:
    """One self-contained file: figures inlined as base64 PNG."""
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width,initial-scale=1'>",
        f"<title>{html.escape(data.name)}</title>",
        f"<style>{CSS}</style></head><body><h1>Report: {html.escape(data.name)}</h1>",
        f"<p>{html.escape(_summary(data))}</p>",
        _findings_html(built.findings),
    ]
    for table in built.tables:
        parts += [f"<h2>{html.escape(table.name)}</h2>", render.to_html(table)]
    parts.append("<h2>figures</h2>")
    for png in figures:
        encoded = base64.b64encode(png.read_bytes()).decode()
        parts.append(
            f"<figure><img alt='{png.stem}' src='data:image/png;base64,{encoded}'>"
            f"<figcaption>{html.escape(png.stem)}</figcaption></figure>"
        )
    path = folder / "report.html"
    path.write_text("".join(parts) + "</body></html>\n")
    return path


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
) -> Path:
    """Write `out_dir/<study>/` and attach it to the study's parent run; returns the folder."""
    uri = tracking_uri or tracking.default_uri(results_dir)
    data = load_study_data(study, results_dir, uri)
    folder = Path(out_dir) / study.name
    folder.mkdir(parents=True, exist_ok=True)
    built = build_tables(data)
    for table in built.tables:
        render.write_table(table, folder / "tables")
    figures = write_figures(data, folder / "figures")
    write_markdown(data, built, figures, folder)
    write_html(data, built, figures, folder)
    attach_report(uri, study.name, folder)
    return folder
