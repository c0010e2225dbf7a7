"""`ablate repair`: a results store a stop left half-made, mended keeping its runs."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    app.command("repair")(repair)


def repair(
    results: str = typer.Option("results", help="results folder (MLflow db, checkpoints)"),
    tracking_uri: str = typer.Option(
        "", help="results store: an MLflow URI (default sqlite in --results) or jsonl:///abs/dir"
    ),
) -> None:
    """Mend an MLflow sqlite database that a stop during an in-place schema upgrade left
    half-made (every run then stops naming it), keeping its runs: a copy is kept first as
    mlflow.db.bak, the half-done upgrade is undone and redone on another copy, which replaces
    the database once whole."""
    from ablate import tracking

    uri = tracking_uri or tracking.default_uri(results)
    typer.echo(tracking.repair(tracking.open_store(uri)))
