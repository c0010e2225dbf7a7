"""The MLflow adapter of the tracking port: `MLflowStore` (a `StudyStore` on any MLflow tracking
URI: a tracking server), `MLflowDatabaseStore` (on a database: sqlite, PostgreSQL…; with its
leases' place and a UI) and `MLflowStudy` (a study's parent run). The
adapter's modules (`mlflow*.py` here) are the only code that imports mlflow, and they do so
inside functions: importing mlflow costs ~1.8 s."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ablate.base.errors import ConfigError
from ablate.base.sql_urls import driver_url
from ablate.base.store.common import artifact_files
from ablate.base.store.port import Guard, terminal
from ablate.base.store.table import RunTable
from ablate.base.store.tags import CURRENT, KIND, PLAN_MARKED, RESUMES, STUDY, TRIAL_ID
from ablate.base.store.ui import StoreUI
from ablate.tracking import mlflow_read, mlflow_schema
from ablate.tracking.mlflow_client import (
    PARENT,
    client,
    experiment_id,
    is_failure,
    parents,
    quoted,
    search,
    set_tags,
    sqlite_path,
    study_filter,
)
from ablate.tracking.mlflow_http import is_http, server_problem
from ablate.tracking.mlflow_tracker import MLflowTracker, held_steps
from ablate.tracking.sql_leases import LeaseStore


class MLflowStudy:
    """The parent run of one study; hands out one child run (an `MLflowTracker`) per trial."""

    def __init__(self, uri: str, study_name: str, experiment_id: str, run_id: str) -> None:
        self.uri, self.study_name = uri, study_name
        self.experiment_id, self.run_id = experiment_id, run_id
        self._client = client(uri)

    @classmethod
    def open(cls, uri: str, study_name: str, *, experiment: str | None = None) -> MLflowStudy:
        """The study's parent run, created (with its experiment) when it does not exist yet,
        set RUNNING when it does."""
        api = client(uri)
        path = sqlite_path(uri)
        root = None if path is None else path.parent / "artifacts"
        experiment_id_ = experiment_id(api, experiment or study_name, root)
        return cls(uri, study_name, experiment_id_, _open_parent(api, experiment_id_, study_name))

    def _trial_runs(self, trial_id: str | None = None) -> list[Any]:
        where = f"tags.`{KIND}` = 'trial' and {study_filter(self.study_name)}"
        if trial_id is not None:
            where += f" and tags.`{TRIAL_ID}` = {quoted(trial_id)}"
        return search(self._client, [self.experiment_id], where)

    def set_tags(self, tags: Mapping[str, str]) -> None:
        set_tags(self._client, self.run_id, tags)

    def attach(self, path: str | Path, prefix: str = "") -> None:
        """Log a file, or every file of a folder, as artifacts under `prefix` (status kept)."""
        for file, folder in artifact_files(path, prefix):
            self._client.log_artifact(self.run_id, str(file), folder or None)

    def trial_status(self) -> dict[str, str]:
        """trial_id -> status of its child run; FINISHED wins over duplicates, else the latest."""
        status: dict[str, str] = {}
        for run in self._trial_runs():  # oldest first: a later run overrides an earlier one
            trial_id = run.data.tags.get(TRIAL_ID)
            if trial_id is not None and status.get(trial_id) != "FINISHED":
                status[trial_id] = run.info.status
        return status

    def trial_tracker(
        self, trial_id: str, *, run_name: str, tags: Mapping[str, str], guard: Guard | None = None
    ) -> MLflowTracker:
        """The child run of `trial_id`: its unfinished run resumed (one run per trial, however
        often it is restarted; the tracker then skips every (metric, step) the run holds), else
        a new one. A FINISHED trial is never trained again. `guard()`, called before each
        write, raises when this process may no longer write the run (its lease was lost)."""
        runs = self._trial_runs(trial_id)
        finished = [r.info.run_id for r in runs if r.info.status == "FINISHED"]
        if finished:
            raise ValueError(f"trial {trial_id} already has a FINISHED run ({finished[0]})")
        held: dict[str, set[int]] = {}
        if runs:
            run = runs[-1]
            run_id = run.info.run_id
            held = held_steps(self._client, run)
            self._client.update_run(run_id, status="RUNNING")
            resumes = int(run.data.tags.get(RESUMES, "0")) + 1
            tags = {**tags, RESUMES: str(resumes)}
        else:
            identity = {KIND: "trial", STUDY: self.study_name, TRIAL_ID: trial_id}
            identity[PARENT] = self.run_id
            run = self._client.create_run(self.experiment_id, tags=identity, run_name=run_name)
            run_id = run.info.run_id
        tracker = MLflowTracker(self.uri, run_id, api=self._client, held=held, guard=guard)
        tracker.set_tags(tags)
        return tracker

    def mark_plan(self, trial_ids: set[str]) -> int:
        """Tag every trial run with whether its trial is in the plan `trial_ids`; the number
        tagged "false" (the runs of trials an edited study dropped)."""
        dropped = 0
        for run in self._trial_runs():
            current = "true" if run.data.tags.get(TRIAL_ID) in trial_ids else "false"
            dropped += current == "false"
            if run.data.tags.get(CURRENT) != current:
                self._client.set_tag(run.info.run_id, CURRENT, current)
        self.set_tags({PLAN_MARKED: "true", CURRENT: "true"})  # the parent stays in the view
        return dropped

    def close(self, status: str = "FINISHED") -> None:
        self._client.set_terminated(self.run_id, terminal(status))


def _open_parent(api: Any, experiment_id: str, study_name: str) -> str:
    where = f"tags.`{KIND}` = 'study' and {study_filter(study_name)}"
    runs = search(api, [experiment_id], where)
    if not runs:
        tags = {KIND: "study", STUDY: study_name}
        return api.create_run(experiment_id, tags=tags, run_name=study_name).info.run_id
    run = runs[0]  # the oldest, should a race ever have created two
    if run.info.status != "RUNNING":
        api.update_run(run.info.run_id, status="RUNNING")
    return run.info.run_id


class MLflowStore:
    """A `StudyStore` on any MLflow tracking URI (see `ablate.tracking.mlflow_client`) that
    classifies its own failures (`StoreFailures`): the database, the tracking server."""

    kind = "MLflow tracking server"

    def __init__(self, uri: str) -> None:
        self.uri = uri

    def init(self) -> None:
        """Create the database schema once, before processes fan out: concurrent first use of a
        fresh sqlite file races on the migrations. A sqlite file is built whole under another
        name and renamed into place, or rebuilt when a kill left it half-made and empty
        (`mlflow_schema`). Idempotent."""
        path = sqlite_path(self.uri)
        if path is not None:
            mlflow_schema.ensure(path)
        client(self.uri).search_experiments(max_results=1)  # a server's or other database's

    def exists(self) -> bool:
        path = sqlite_path(self.uri)
        return path is None or path.is_file()

    def write_problem(self) -> str | None:
        if is_http(self.uri):  # a server left down is said now, not after minutes of retries
            return server_problem(self.uri)
        path = sqlite_path(self.uri)
        if path is not None and path.exists() and not os.access(path, os.W_OK):
            return f"{path} is not writable"
        return None if path is None else mlflow_schema.leftover_problem(path)

    def read_problem(self) -> str | None:
        """A sqlite file a stop left half-upgraded, holding runs, named with its repair."""
        path = sqlite_path(self.uri)
        return None if path is None or not path.is_file() else mlflow_schema.leftover_problem(path)

    def open_study(self, name: str, *, experiment: str | None = None) -> MLflowStudy:
        return MLflowStudy.open(self.uri, name, experiment=experiment)

    def find_study(self, name: str) -> MLflowStudy | None:
        found = parents(client(self.uri), name)
        if not found:
            return None
        run = found[0]  # the oldest, as `open_study` picks it
        return MLflowStudy(self.uri, name, run.info.experiment_id, run.info.run_id)

    def runs(self, study_name: str) -> RunTable:
        return mlflow_read.load_runs(self.uri, study_name)

    def metric_history(self, run_id: str, key: str) -> list[tuple[int, float]]:
        return mlflow_read.metric_history(self.uri, run_id, key)

    def metric_rows_per_step(self, run_id: str, key: str) -> dict[int, int]:
        return mlflow_read.metric_rows_per_step(self.uri, run_id, key)

    def list_artifacts(self, run_id: str, path: str | None = None) -> list[str]:
        return mlflow_read.list_artifacts(self.uri, run_id, path)

    def download_artifacts(self, run_id: str, path: str, dst: str | Path) -> Path:
        return mlflow_read.download_artifacts(self.uri, run_id, path, dst)

    def is_failure(self, exc: BaseException) -> bool:
        return is_failure(exc)


class MLflowDatabaseStore(MLflowStore):
    """An MLflow store on a database (sqlite, PostgreSQL, MySQL…, or MLflow's file store): it
    keeps its trial leases beside or inside the database (`LeasePort`), and `ablate ui` serves it
    (`HasUI`). A tracking server is a plain `MLflowStore`: it serves its own UI, and its leases
    live in the results folder."""

    kind = "MLflow database"

    def leases(self, results_root: Path) -> LeaseStore:
        """The tracking database itself when it is PostgreSQL, `leases.db` beside it when it is
        sqlite, else `leases.db` in the results folder."""
        path = sqlite_path(self.uri)
        if path is not None:
            return LeaseStore.in_folder(path.parent)
        if self.uri.startswith(("postgresql", "postgres://")):
            return LeaseStore(driver_url(self.uri))
        return LeaseStore.in_folder(results_root)

    def repair(self) -> str:
        """A sqlite database a stop left half-upgraded, mended on a copy keeping its runs
        (`mlflow_repair`; a copy of it as it was is kept first)."""
        from ablate.tracking.mlflow_repair import keep_copy, repair

        path = sqlite_path(self.uri)
        if path is None or not path.is_file():
            raise ConfigError(f"{self.uri}: ablate repair mends a sqlite MLflow database file")
        with mlflow_schema.building(path):
            backup = keep_copy(path)
            return f"{repair(path)} (as it was: {backup})"

    def ui(self) -> StoreUI:
        """`mlflow server` on the database."""
        from ablate.tracking.mlflow_views import MLflowUI

        return MLflowUI(self.uri)
