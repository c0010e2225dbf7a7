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

    from ablate.report.build import build_report
    from ablate.study import load_study

    folder = build_report(load_study(study), results, out, tracking_uri)
    Console().print(f"report written to {folder / 'report.md'} and {folder / 'report.html'}")
