"""MLflow access shared by the MLflow adapter's modules: one client per URI, paged searches,
the experiment of a study, tag batches, and which errors are the store's. mlflow is imported
inside functions (it costs ~1.8 s), so that importing the adapter stays cheap.

Layout: one experiment per study (default name: the study's), one parent run per study, one
child run per trial (`mlflow.parentRunId` = the parent), tagged as `ablate.base.store.tags` says.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ablate.base.store.common import TAG_MAX_CHARS, chunks, disk_failure, raised_by, text_value
from ablate.base.store.tags import KIND, STUDY

PARENT = "mlflow.parentRunId"
#: A study's experiment is model training, not GenAI (MLflow 3's UI types experiments so).
EXPERIMENT_TAGS = {"mlflow.experimentKind": "custom_model_development"}
BATCH_PARAMS_TAGS = 100
#: Errors of these packages are the store's (the database, the tracking server, the leases).
STORE_PACKAGES = ("sqlalchemy", "sqlite3", "mlflow", "requests", "urllib3", "psycopg2")


def is_failure(exc: BaseException) -> bool:
    """An error of the MLflow store, its lease database or the disk, not of a trial."""
    return disk_failure(exc) or raised_by(exc, STORE_PACKAGES)


def sqlite_path(uri: str) -> Path | None:
    prefix = "sqlite:///"
    return Path(uri[len(prefix) :]).resolve() if uri.startswith(prefix) else None


@functools.lru_cache(maxsize=8)
def client(uri: str) -> Any:
    # Cached per URI: building a client (and its store's engine) costs ~0.6 s.
    from mlflow.tracking import MlflowClient

    from ablate.tracking.mlflow_http import prepare
    from ablate.tracking.sql_waits import watch_sql

    prepare(uri)  # a server that stops answering: bounded retries, said at once
    watch_sql()  # a statement waiting on a database another process holds: said while it waits

    # Schema creation logs a dozen INFO lines per fresh database. A failing database write is
    # logged by MLflow as a full traceback before it raises; the runner reports it in one line.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)
    # An explicit client per URI, never the global `mlflow.set_tracking_uri`: several studies
    # (and test databases) can then coexist in one process.
    return MlflowClient(tracking_uri=uri)


def quoted(value: str) -> str:
    # MLflow's filter grammar has no escape for quotes; names and ids never need them.
    if "'" in value or '"' in value:
        raise ValueError(f"study names and trial ids may not contain quotes: {value!r}")
    return f"'{value}'"


def all_pages(fetch: Any) -> list[Any]:
    """Every item of a paged MLflow search; `fetch(page_token)` returns one page."""
    items: list[Any] = []
    token = None
    while True:
        page = fetch(token)
        items.extend(page)
        token = page.token
        if not token:
            return items


def search(api: Any, experiment_ids: list[str], where: str) -> list[Any]:
    """All runs matching `where`, oldest first."""
    order = ["attributes.start_time ASC"]
    return all_pages(lambda t: api.search_runs(experiment_ids, where, order_by=order, page_token=t))


def all_experiments(api: Any) -> list[str]:
    return [e.experiment_id for e in all_pages(lambda t: api.search_experiments(page_token=t))]


def study_filter(study: str) -> str:
    return f"tags.`{STUDY}` = {quoted(study)}"


def parent_filter(study: str | None = None) -> str:
    where = f"tags.`{KIND}` = 'study'"
    return where if study is None else f"{where} and {study_filter(study)}"


def trial_filter(study: str) -> str:
    return f"tags.`{KIND}` = 'trial' and {study_filter(study)}"


def parents(api: Any, study: str) -> list[Any]:
    """The parent runs of `study` in any experiment, oldest first (one, unless a race made two)."""
    experiments = all_experiments(api)
    return search(api, experiments, parent_filter(study)) if experiments else []


def experiment_id(api: Any, name: str, artifact_root: Path | None) -> str:
    from mlflow.exceptions import MlflowException

    exp = api.get_experiment_by_name(name)
    if exp is None:
        # Artifacts next to the database, not in an `mlruns/` of whatever the cwd happens to be.
        location = None if artifact_root is None else artifact_root.as_uri()
        try:
            return api.create_experiment(name, location, tags=EXPERIMENT_TAGS)
        except MlflowException:  # another process created it first
            exp = api.get_experiment_by_name(name)
            if exp is None:
                raise
    if exp.lifecycle_stage != "active":
        raise ValueError(f"MLflow experiment {name!r} is deleted: restore it or use another name")
    return exp.experiment_id


def set_tags(api: Any, run_id: str, tags: Mapping[str, Any]) -> None:
    from mlflow.entities import RunTag

    items = [RunTag(k, text_value(v)[:TAG_MAX_CHARS]) for k, v in tags.items()]
    for chunk in chunks(items, BATCH_PARAMS_TAGS):
        api.log_batch(run_id, tags=chunk)
