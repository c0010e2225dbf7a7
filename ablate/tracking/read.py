"""Read-only MLflow queries for the report and the CLI: a study's trial runs as a frame, a
metric's full curve, artifacts, the parent run's id."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ablate.tracking import CURRENT, KIND, STUDY, TRIAL, _all_pages, _client, _quoted, _search

if TYPE_CHECKING:
    import pandas


def load_runs(uri: str, study_name: str) -> pandas.DataFrame:
    """One row per trial run of a study (any experiment): run_id, trial_id, status, run_name,
    start/end time, `params.*`, `tags.*` and the last value of each metric as `metrics.*`.
    Runs of trials the study's current plan dropped (an edited study: `CURRENT` "false") are
    left out: the summary, the pilot's SD and the report count the current plan only."""
    import pandas as pd

    client = _client(uri)
    pages = _all_pages(lambda t: client.search_experiments(page_token=t))
    experiments = [e.experiment_id for e in pages]
    where = f"tags.`{KIND}` = 'trial' and tags.`{STUDY}` = {_quoted(study_name)}"
    rows = []
    for run in _search(client, experiments, where) if experiments else []:
        info, data = run.info, run.data
        if data.tags.get(CURRENT) == "false":
            continue
        row = {"run_id": info.run_id, "trial_id": data.tags.get(TRIAL), "status": info.status}
        row.update(run_name=info.run_name, start_time=info.start_time, end_time=info.end_time)
        row.update({f"params.{k}": v for k, v in data.params.items()})
        row.update({f"tags.{k}": v for k, v in data.tags.items()})
        row.update({f"metrics.{k}": v for k, v in data.metrics.items()})
        rows.append(row)
    return pd.DataFrame(rows, columns=None if rows else ["run_id", "trial_id", "status"])


def metric_history(uri: str, run_id: str, key: str) -> list[tuple[int, float]]:
    """[(step, value)] of one metric in step order (the full curve, unlike `search_runs`). A step
    logged twice (a trial resumed from a checkpoint older than its last flush) keeps the later
    value, which the resumed run computed."""
    history = _client(uri).get_metric_history(run_id, key)
    curve = {m.step: m.value for m in sorted(history, key=lambda m: (m.timestamp, m.step))}
    return sorted(curve.items())


def metric_rows_per_step(uri: str, run_id: str, key: str) -> dict[int, int]:
    """{step: rows the store holds for `key` at that step}: more than 1 is a duplicate."""
    counts: dict[int, int] = {}
    for m in _client(uri).get_metric_history(run_id, key):
        counts[m.step] = counts.get(m.step, 0) + 1
    return counts


def list_artifacts(uri: str, run_id: str, path: str | None = None) -> list[str]:
    """Artifact paths of a run directly under `path` (e.g. "samples"); [] when there are none."""
    return [a.path for a in _client(uri).list_artifacts(run_id, path)]


def download_artifacts(uri: str, run_id: str, path: str, dst: str | Path) -> Path:
    """Copy a run's artifact `path` (file or folder) under `dst`; returns the local path."""
    import os
    from unittest import mock

    Path(dst).mkdir(parents=True, exist_ok=True)
    # one progress bar per file floods the log
    with mock.patch.dict(os.environ, {"MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}):
        return Path(_client(uri).download_artifacts(run_id, path, str(dst)))


def study_run_id(uri: str, study_name: str) -> str | None:
    """The id of a study's parent run (oldest, as `MLflowStudy` picks it), or None."""
    client = _client(uri)
    pages = _all_pages(lambda t: client.search_experiments(page_token=t))
    where = f"tags.`{KIND}` = 'study' and tags.`{STUDY}` = {_quoted(study_name)}"
    runs = _search(client, [e.experiment_id for e in pages], where) if pages else []
    return runs[0].info.run_id if runs else None
