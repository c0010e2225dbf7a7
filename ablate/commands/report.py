"""`ablate report STUDY`: statistics, claims, tables and figures of a study, read from its
results store."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    app.command("report")(report)


def report(
    study: Path = typer.Argument(..., help="study file (studies/x.py) or module (studies.x)"),
    results: Path = typer.Option(Path("results"), help="results folder holding mlflow.db"),
    out: Path = typer.Option(Path("reports"), help="reports are written to OUT/<study>/"),
    tracking_uri: str | None = typer.Option(
        None, help="results store: an MLflow URI or jsonl:///abs/dir (default RESULTS/mlflow.db)"
    ),
) -> None:
    """Write reports/<study>/ (report.md, report.html, tables/, figures/) and attach it to the
    study's parent run in the results store."""
    from rich.console import Console

    from ablate import tracking
    from ablate.report.build import build_report
    from ablate.study import load_study

    loaded = load_study(study)
    uri = tracking_uri or tracking.default_uri(results)
    _require_finished_runs(tracking.open_store(uri), loaded.name, study, results)
    folder = build_report(loaded, results, out, uri)
    Console().print(f"report written to {folder / 'report.md'} and {folder / 'report.html'}")


def _require_finished_runs(store, name: str, study: Path, results: Path) -> None:
    from ablate.errors import StudyError

    if not store.exists():  # reading a missing store would create it, for nothing to show
        raise StudyError(
            f"no runs of study {name!r} in {results} (no {store.kind} at {store.uri}): run it "
            f"first (ablate run {study} --results {results})"
        )
    runs = store.runs(name).runs
    uri = store.uri
    if runs.empty:
        raise StudyError(f"no runs of study {name!r} in {uri}: run it first (ablate run {study})")
    if not (runs["status"] == "FINISHED").any():
        states = ", ".join(f"{n} {s}" for s, n in runs["status"].value_counts().items())
        raise StudyError(
            f"study {name!r} has no finished trial in {uri} ({states}): finish it first "
            f"(ablate run {study})"
        )
