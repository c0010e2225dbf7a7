"""`ablate status`: where every trial of a study is, read from the results store (and, for a
study submitted to Slurm, its latest array)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    app.command("status")(status)


def status(
    study: str = typer.Argument(..., help="study file, e.g. studies/quickstart.py"),
    results: str = typer.Option("results", help="results folder (MLflow db, checkpoints)"),
    tracking_uri: str = typer.Option(
        "", help="results store: an MLflow URI (default sqlite in --results) or jsonl:///abs/dir"
    ),
) -> None:
    """Every trial's state (FINISHED, RUNNING, KILLED, FAILED, not started), its resumes, who
    leases it now, and its Slurm array task when the study was submitted with --launcher slurm."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from ablate import tracking
    from ablate.study.identity import identified_trials
    from ablate.study.slurm_array import latest_submission, trial_states
    from ablate.study.store_failures import read_errors
    from ablate.study.study import load_study

    loaded = load_study(study)
    uri = tracking_uri or tracking.default_uri(results)
    trials = identified_trials(loaded, chosen=_chosen_or_shared(loaded, results))
    with read_errors(uri):  # a damaged database or file of the store: one line naming it
        states = trial_states(loaded, trials, uri, results)
    submission = latest_submission(results, loaded) or {}
    tasks = submission.get("tasks", {})
    table = Table(title=escape(f"{loaded.name}: {len(trials)} trials"))
    for col in ("arm", "model", "template", "seed", "state", "resumes", "lease", "array task"):
        table.add_column(col)
    for s in states:
        spec = s.trial.spec
        state = s.outcome if s.state == "FINISHED" and s.outcome == "diverged" else s.state
        table.add_row(
            *(escape(str(v)) for v in (s.trial.arm, spec.model, spec.template, spec.seed)),
            state,
            str(s.resumes),
            escape(s.holder or "-"),
            escape(tasks.get(s.trial.id, "-")),
        )
    Console(width=200).print(table)
    counts: dict[str, int] = {}
    for s in states:
        counts[s.state] = counts.get(s.state, 0) + 1
    typer.echo(", ".join(f"{n} {state}" for state, n in sorted(counts.items())))


def _chosen_or_shared(study, results: str) -> dict:
    """Each tuned arm's chosen setting; before the tuning phase has finished, the study's own
    (shared) setting, said in one line (its trials then show as not started)."""
    from ablate.base.errors import StudyError
    from ablate.study.tune_phase import chosen_settings

    try:
        return chosen_settings(study, results)
    except StudyError as exc:
        typer.echo(f"tuning not finished ({exc}); trials shown at the shared setting")
        return {}
