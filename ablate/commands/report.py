"""`ablate report STUDY`: statistics, claims, tables and figures of a study, read from MLflow."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    app.command("report")(report)


def report(
    study: Path = typer.Argument(..., help="study file (studies/x.py) or module (studies.x)"),
    results: Path = typer.Option(Path("results"), help="results folder holding mlflow.db"),
    out: Path = typer.Option(Path("reports"), help="reports are written to OUT/<study>/"),
    tracking_uri: str | None = typer.Option(None, help="MLflow URI (default: RESULTS/mlflow.db)"),
) -> None:
    """Write reports/<study>/ (report.md, report.html, tables/, figures/) and attach it to the
    study's MLflow run."""
    from rich.console import Console

    from ablate.report.render.build import build_report
    from ablate.study import load_study

    loaded = load_study(study)
    uri = tracking_uri or _existing_database(results, loaded.name, study)
    _require_finished_runs(uri, loaded.name, study)
    folder = build_report(loaded, results, out, uri)
    Console().print(f"report written to {folder / 'report.md'} and {folder / 'report.html'}")


def _existing_database(results: Path, name: str, study: Path) -> str:
    """The default sqlite URI, only if its file exists: opening a missing one would create it
    (and the results folder) for a report that has nothing to show."""
    from ablate.errors import StudyError

    db = results.expanduser().resolve() / "mlflow.db"
    if not db.is_file():
        raise StudyError(
            f"no runs of study {name!r} in {results} (no mlflow.db): run it first "
            f"(ablate run {study} --results {results})"
        )
    return f"sqlite:///{db}"


def _require_finished_runs(uri: str, name: str, study: Path) -> None:
    from ablate import tracking
    from ablate.errors import StudyError

    runs = tracking.load_runs(uri, name)
    if runs.empty:
        raise StudyError(f"no runs of study {name!r} in {uri}: run it first (ablate run {study})")
    if not (runs["status"] == "FINISHED").any():
        states = ", ".join(f"{n} {s}" for s, n in runs["status"].value_counts().items())
        raise StudyError(
            f"study {name!r} has no finished trial in {uri} ({states}): finish it first "
            f"(ablate run {study})"
        )
