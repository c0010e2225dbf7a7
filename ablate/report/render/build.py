"""`build_report`: MLflow → `reports/<study>/` (report.md, report.html, tables/, figures/),
also attached to the study's MLflow parent run."""

from __future__ import annotations

from pathlib import Path

from ablate import tracking
from ablate.report.data.load import StudyData, load_study_data
from ablate.report.render.figures import write_figures
from ablate.report.render.page import Page, write_page
from ablate.report.render.tables import build_tables
from ablate.study import Study


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


def write_report(data: StudyData, folder: Path) -> Path:
    """The study's report in `folder`: tables/, figures/, report.md and report.html."""
    folder.mkdir(parents=True, exist_ok=True)
    built = build_tables(data)
    figures = write_figures(data, folder / "figures")
    page = Page(
        title=f"Report: {data.name}",
        summary=_summary(data),
        findings=built.findings,
        tables=built.tables,
        figures=figures,
        tab=data.name,
    )
    write_page(page, folder)
    return folder


def attach_to_mlflow(uri: str, study_name: str, folder: Path) -> bool:
    """Log the report folder as artifacts `report/` of the study's parent run (if it exists),
    then set the parent run back to FINISHED (`MLflowStudy` reopens it as RUNNING)."""
    if tracking.study_run_id(uri, study_name) is None:
        return False
    parent = tracking.MLflowStudy.open(uri, study_name)
    try:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                relative = path.parent.relative_to(folder).as_posix()
                parent.log_artifact(path, "report" if relative == "." else f"report/{relative}")
    finally:
        parent.close("FINISHED")
    return True


def build_report(
    study: Study,
    results_dir: str | Path = "results",
    out_dir: str | Path = "reports",
    tracking_uri: str | None = None,
) -> Path:
    """Write `out_dir/<study>/` and attach it to the study's MLflow run; returns the folder."""
    report_study(study, results_dir, out_dir, tracking_uri)
    return Path(out_dir) / study.name


def report_study(
    study: Study,
    results_dir: str | Path = "results",
    out_dir: str | Path = "reports",
    tracking_uri: str | None = None,
) -> StudyData:
    """`build_report`'s work: load the study's results, write `out_dir/<study>/`, attach it to
    the study's MLflow run; returns the data (a reproduction tests its findings on it)."""
    uri = tracking_uri or tracking.default_tracking_uri(results_dir)
    data = load_study_data(study, results_dir, uri)
    folder = write_report(data, Path(out_dir) / study.name)
    attach_to_mlflow(uri, study.name, folder)
    return data
