"""`ablate tune`: Optuna search over a study's declared space, with pruning (search only)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    app.command("tune")(tune)


def tune(
    study: str = typer.Argument(..., help="study file declaring search={...}"),
    trials: int = typer.Option(20, min=1, help="trials to run (added to earlier ones)"),
    storage: str = typer.Option("", help="Optuna storage URL (default sqlite in --results)"),
    results: str = typer.Option("results", help="results folder (MLflow db, optuna.db)"),
    tracking_uri: str = typer.Option("", help="MLflow URI (default sqlite in --results)"),
    seed: int = typer.Option(0, help="TPE sampler seed"),
    startup_trials: int = typer.Option(5, min=0, help="trials before pruning starts"),
) -> None:
    """Search STUDY's space on its reference arm (first model, template, seed); prune trials
    whose periodic eval pass@1 falls below the median; print the best parameters."""
    import json

    from ablate.base.threads import apply_threads
    from ablate.study.preflight import preflight_study
    from ablate.study.study import load_study
    from ablate.study.tune import tune as run_tune

    loaded = load_study(study)
    if loaded.search:  # without one, tune says so at once
        preflight_study(loaded, results)
    apply_threads()

    def on_trial(number, state, value, params) -> None:
        shown = "-" if value is None else f"{value:.3f}"
        typer.echo(f"trial {number}: {state} pass@1={shown} {json.dumps(params)}")

    result = run_tune(
        loaded,
        n_trials=trials,
        storage=storage or None,
        results_dir=results,
        tracking_uri=tracking_uri or None,
        seed=seed,
        startup_trials=startup_trials,
        on_trial=on_trial,
    )
    typer.echo(f"best pass@1 {result.best_value:.3f} (MLflow parent run {result.study!r})")
    typer.echo(f"best params: {json.dumps(result.best_params)}")
