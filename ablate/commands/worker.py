"""`ablate worker`: pull trials of a study from a shared Optuna storage until none is left."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    app.command("worker")(worker)


def worker(
    study: str = typer.Argument(..., help="study file, e.g. studies/quickstart.py"),
    storage: str = typer.Option(
        ..., help="Optuna storage shared by all workers, e.g. postgresql://user:pw@host/optuna"
    ),
    tracking_uri: str = typer.Option(
        "", help="shared results store, an MLflow URI (default sqlite in --results: one machine)"
    ),
    results: str = typer.Option("results", help="local folder for trial checkpoints"),
    threads: int = typer.Option(
        0, min=0, help="torch threads (0 = OMP_NUM_THREADS, else the cores free now)"
    ),
    heartbeat_interval: int = typer.Option(60, min=1, help="seconds between heartbeats"),
    grace_period: int = typer.Option(
        180, min=1, help="seconds without heartbeat before a trial counts as dead and is retried"
    ),
    max_retry: int = typer.Option(2, min=0, help="retries of a trial whose worker died"),
) -> None:
    """Run WAITING trials of STUDY from --storage (enqueued by the first worker) until none is
    left. Start one per machine (or per core group); they share the work."""
    from pathlib import Path

    from ablate.base.threads import apply_threads
    from ablate.study.distributed import WorkerConfig, run_worker
    from ablate.study.preflight import preflight_study
    from ablate.study.runner import RunHooks
    from ablate.study.study import load_study
    from ablate.tracking import default_uri

    loaded = load_study(study)
    preflight_study(loaded, results, tracking_uri or None)
    apply_threads(requested=threads)
    config = WorkerConfig(
        storage=storage,
        tracking_uri=tracking_uri or default_uri(results),
        results_dir=Path(results),
        heartbeat_interval=heartbeat_interval,
        grace_period=grace_period,
        max_retry=max_retry,
    )

    def on_start(trial, index, total) -> None:
        s = trial.spec
        typer.echo(f"start {trial.id} {trial.arm} | {s.model} | {s.template} | seed {s.seed}")

    def on_end(out) -> None:
        typer.echo(f"{out.outcome} {out.trial_id} {out.arm} seed {out.seed} {out.message}")

    outcomes = run_worker(loaded, config, RunHooks(on_trial_start=on_start, on_trial_end=on_end))
    ran = sum(o.outcome != "skipped" for o in outcomes)
    typer.echo(f"worker ran {ran} trial(s), skipped {len(outcomes) - ran}; no WAITING trial left")
