"""Read-only MLflow queries for the report and the CLI: a study's trial runs as `RunRecord`s, a
metric's full curve, artifacts."""

from __future__ import annotations

from pathlib import Path

from ablate.base.store.table import RunRecord, RunTable
from ablate.tracking.mlflow_client import all_experiments, client, search, trial_filter


def load_runs(uri: str, study_name: str) -> RunTable:
    """The trial runs of a study (any experiment), oldest first, current plan only."""
    api = client(uri)
    experiments = all_experiments(api)
    found = search(api, experiments, trial_filter(study_name)) if experiments else []
    return RunTable.from_records(
        RunRecord(
            run_id=run.info.run_id,
            status=run.info.status,
            run_name=run.info.run_name or "",
            start_time=run.info.start_time,
            end_time=run.info.end_time,
            tags=run.data.tags,
            params=run.data.params,
            metrics=run.data.metrics,
        )
        for run in found
    )


def metric_history(uri: str, run_id: str, key: str) -> list[tuple[int, float]]:
    """[(step, value)] of one metric in step order (the full curve, unlike `search_runs`). A step
    logged twice (a trial resumed from a checkpoint older than its last flush) keeps the later
    value, which the resumed run computed."""
    history = client(uri).get_metric_history(run_id, key)
    curve = {m.step: m.value for m in sorted(history, key=lambda m: (m.timestamp, m.step))}
    return sorted(curve.items())


def metric_rows_per_step(uri: str, run_id: str, key: str) -> dict[int, int]:
    """{step: rows the store holds for `key` at that step}: more than 1 is a duplicate."""
    counts: dict[int, int] = {}
    for m in client(uri).get_metric_history(run_id, key):
        counts[m.step] = counts.get(m.step, 0) + 1
    return counts


def list_artifacts(uri: str, run_id: str, path: str | None = None) -> list[str]:
    """Artifact paths of a run directly under `path` (e.g. "samples"); [] when there are none."""
    return [a.path for a in client(uri).list_artifacts(run_id, path)]


def download_artifacts(uri: str, run_id: str, path: str, dst: str | Path) -> Path:
    """Copy a run's artifact `path` (file or folder) under `dst`; returns the local path."""
    import os
    from unittest import mock

    Path(dst).mkdir(parents=True, exist_ok=True)
    # one progress bar per file floods the log
    with mock.patch.dict(os.environ, {"MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}):
        return Path(client(uri).download_artifacts(run_id, path, str(dst)))
