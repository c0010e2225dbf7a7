"""Where metrics go. The `Tracker` protocol with a no-op and an in-memory implementation; the
MLflow one lives here too (this is the only module that may import mlflow, and it does so lazily:
importing mlflow costs ~1.8 s, so `import ablate.tracking` must stay cheap). The package
`ablate.tracking` (this module and `read.py`) is the only code that talks to MLflow.

MLflow layout: one experiment per study (default name: the study's), one parent run per study
(tags `ablate.kind=study`, `ablate.study`), one child run per trial (tags `ablate.kind=trial`,
`ablate.study`, `ablate.trial_id`, `mlflow.parentRunId`). Runs are found again by these tags, never
by run name, so a resumed study or trial reuses its runs.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ablate.trackers import (  # re-exported: the tracker interface beside its MLflow implementation
    METRIC_NAME,
    TAG_MAX_CHARS,
    Background,
    MemoryTracker,
    NullTracker,
    Tracker,
    algorithm_diff_tags,
    environment_tags,
)
from ablate.trackers import chunks as _chunks
from ablate.trackers import text_value as _text

__all__ = [
    "METRIC_NAME",
    "MLflowStudy",
    "MLflowTracker",
    "MemoryTracker",
    "NullTracker",
    "Tracker",
    "algorithm_diff_tags",
    "default_tracking_uri",
    "download_artifacts",
    "environment_tags",
    "init_store",
    "list_artifacts",
    "load_runs",
    "metric_history",
    "metric_rows_per_step",
    "study_run_id",
]


PARAM_MAX_CHARS = 6000
_BATCH_PARAMS_TAGS = 100
_BATCH_METRICS = 1000
# One log_batch per ~20 steps instead of one call per step (~11 ms each on sqlite, ~5% of a tiny
# model's step); a killed trial loses at most these steps' metrics, as it resumes from a checkpoint.
FLUSH_EVERY_STEPS = 20
FLUSH_EVERY_METRICS = 900
_TERMINAL = ("FINISHED", "FAILED", "KILLED")

KIND, STUDY, TRIAL, PARENT = "ablate.kind", "ablate.study", "ablate.trial_id", "mlflow.parentRunId"
#: Every tag ablate writes is under `ablate.`; how a trial ended and why (the report's source).
OUTCOME, OUTCOME_MESSAGE = "ablate.outcome", "ablate.outcome_message"
CURRENT = "ablate.current"  # on a trial run: "false" once the study's plan dropped its trial
#: A study's experiment is model training, not GenAI (MLflow 3's UI types experiments so).
EXPERIMENT_TAGS = {"mlflow.experimentKind": "custom_model_development"}


def default_tracking_uri(results_dir: str | Path) -> str:
    """`sqlite:////abs/<results_dir>/mlflow.db`; creates `results_dir`."""
    root = Path(results_dir).resolve()
    root.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{root / 'mlflow.db'}"


def init_store(uri: str) -> None:
    """Create the database schema once, before processes fan out: concurrent first use of a fresh
    sqlite file races on the migrations. Idempotent."""
    path = _sqlite_path(uri)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    _client(uri).search_experiments(max_results=1)  # the store runs its migrations on first use


def _sqlite_path(uri: str) -> Path | None:
    prefix = "sqlite:///"
    return Path(uri[len(prefix) :]).resolve() if uri.startswith(prefix) else None


@functools.lru_cache(maxsize=8)
def _client(uri: str) -> Any:
    # Cached per URI: building a client (and its store's engine) costs ~0.6 s.
    from mlflow.tracking import MlflowClient

    # Schema creation logs a dozen INFO lines per fresh database. A failing database write is
    # logged by MLflow as a full traceback before it raises; the runner reports it in one line.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)
    # An explicit client per URI, never the global `mlflow.set_tracking_uri`: several studies
    # (and test databases) can then coexist in one process.
    return MlflowClient(tracking_uri=uri)


def _quoted(value: str) -> str:
    # MLflow's filter grammar has no escape for quotes; names and ids never need them.
    if "'" in value or '"' in value:
        raise ValueError(f"study names and trial ids may not contain quotes: {value!r}")
    return f"'{value}'"


def _all_pages(fetch: Any) -> list[Any]:
    """Every item of a paged MLflow search; `fetch(page_token)` returns one page."""
    items: list[Any] = []
    token = None
    while True:
        page = fetch(token)
        items.extend(page)
        token = page.token
        if not token:
            return items


def _search(client: Any, experiment_ids: list[str], where: str) -> list[Any]:
    """All runs matching `where`, oldest first."""
    order = ["attributes.start_time ASC"]
    return _all_pages(
        lambda t: client.search_runs(experiment_ids, where, order_by=order, page_token=t)
    )


def _experiment_id(client: Any, name: str, artifact_root: Path | None) -> str:
    from mlflow.exceptions import MlflowException

    exp = client.get_experiment_by_name(name)
    if exp is None:
        # Artifacts next to the database, not in an `mlruns/` of whatever the cwd happens to be.
        location = None if artifact_root is None else artifact_root.as_uri()
        try:
            return client.create_experiment(name, location, tags=EXPERIMENT_TAGS)
        except MlflowException:  # another process created it first
            exp = client.get_experiment_by_name(name)
            if exp is None:
                raise
    if exp.lifecycle_stage != "active":
        raise ValueError(f"MLflow experiment {name!r} is deleted: restore it or use another name")
    return exp.experiment_id


class MLflowStudy:
    """The parent run of one study; hands out one child run (an `MLflowTracker`) per trial.
    `MLflowStudy.open(uri, name)` finds or creates the experiment and the parent run; open it
    once in the coordinating process before fanning out (after `init_store`), so that workers
    opening it again find the parent run instead of racing to create two."""

    def __init__(self, uri: str, study_name: str, experiment_id: str, run_id: str) -> None:
        self.uri, self.study_name = uri, study_name
        self.experiment_id, self.run_id = experiment_id, run_id
        self._study_filter = f"tags.`{STUDY}` = {_quoted(study_name)}"
        self._client = _client(uri)

    @classmethod
    def open(cls, uri: str, study_name: str, *, experiment: str | None = None) -> MLflowStudy:
        """The study's parent run, created (with its experiment) when it does not exist yet,
        set RUNNING when it does."""
        client = _client(uri)
        path = _sqlite_path(uri)
        root = None if path is None else path.parent / "artifacts"
        experiment_id = _experiment_id(client, experiment or study_name, root)
        return cls(uri, study_name, experiment_id, _open_parent(client, experiment_id, study_name))

    def _trial_runs(self, trial_id: str | None = None) -> list[Any]:
        where = f"tags.`{KIND}` = 'trial' and {self._study_filter}"
        if trial_id is not None:
            where += f" and tags.`{TRIAL}` = {_quoted(trial_id)}"
        return _search(self._client, [self.experiment_id], where)

    def set_tags(self, tags: Mapping[str, str]) -> None:
        _set_tags(self._client, self.run_id, tags)

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        self._client.log_artifact(self.run_id, str(path), artifact_path)

    def trial_status(self) -> dict[str, str]:
        """trial_id -> status of its child run; FINISHED wins over duplicates, else the latest."""
        status: dict[str, str] = {}
        for run in self._trial_runs():  # oldest first: a later run overrides an earlier one
            trial_id = run.data.tags.get(TRIAL)
            if trial_id is not None and status.get(trial_id) != "FINISHED":
                status[trial_id] = run.info.status
        return status

    def trial_tracker(
        self, trial_id: str, *, run_name: str, tags: Mapping[str, str], guard: Any = None
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
            held = _held_steps(self._client, run)
            self._client.update_run(run_id, status="RUNNING")
            resumes = int(run.data.tags.get("ablate.resumes", "0")) + 1
            tags = {**tags, "ablate.resumes": str(resumes)}
        else:
            identity = {KIND: "trial", STUDY: self.study_name, TRIAL: trial_id, PARENT: self.run_id}
            run = self._client.create_run(self.experiment_id, tags=identity, run_name=run_name)
            run_id = run.info.run_id
        tracker = MLflowTracker(self.uri, run_id, client=self._client, held=held, guard=guard)
        tracker.set_tags(tags)
        return tracker

    def close(self, status: str = "FINISHED") -> None:
        self._client.set_terminated(self.run_id, _terminal(status))


def _open_parent(client: Any, experiment_id: str, study_name: str) -> str:
    where = f"tags.`{KIND}` = 'study' and tags.`{STUDY}` = {_quoted(study_name)}"
    runs = _search(client, [experiment_id], where)
    if not runs:
        tags = {KIND: "study", STUDY: study_name}
        return client.create_run(experiment_id, tags=tags, run_name=study_name).info.run_id
    run = runs[0]  # the oldest, should a race ever have created two
    if run.info.status != "RUNNING":
        client.update_run(run.info.run_id, status="RUNNING")
    return run.info.run_id


def _held_steps(client: Any, run: Any) -> dict[str, set[int]]:
    """metric -> the steps a run already holds (what a resumed trial must not log again)."""
    run_id = run.info.run_id
    return {k: {m.step for m in client.get_metric_history(run_id, k)} for k in run.data.metrics}


def _terminal(status: str) -> str:
    if status not in _TERMINAL:
        raise ValueError(f"status must be one of {', '.join(_TERMINAL)}, got {status!r}")
    return status


def _set_tags(client: Any, run_id: str, tags: Mapping[str, Any]) -> None:
    from mlflow.entities import RunTag

    items = [RunTag(k, _text(v)[:TAG_MAX_CHARS]) for k, v in tags.items()]
    for chunk in _chunks(items, _BATCH_PARAMS_TAGS):
        client.log_batch(run_id, tags=chunk)


class MLflowTracker:
    """A `Tracker` writing to one MLflow run. Metrics are buffered: call `close` (or use it as a
    context manager, which closes FAILED on an exception) so the tail is not lost."""

    def __init__(
        self,
        uri: str,
        run_id: str,
        *,
        client: Any = None,
        held: dict[str, set[int]] | None = None,
        guard: Any = None,
    ) -> None:
        self.uri, self.run_id = uri, run_id
        self._client = client if client is not None else _client(uri)
        self._buffer: list[Any] = []
        self._buffered_steps: set[int] = set()
        self._closed = False
        self._sender = Background()
        # (metric, step) pairs the run already holds: logged once, never again (a resumed
        # trial recomputes the steps after its checkpoint, which may have been sent already)
        self._held: dict[str, set[int]] = held if held is not None else {}
        self._guard = guard

    def log_params(self, params: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        self._sender.wait()
        values = {k: _text(v)[:PARAM_MAX_CHARS] for k, v in params.items()}
        # Params are immutable; re-logging an identical one on resume is skipped, a changed one
        # still raises (it would mean the trial's definition changed under the same id).
        logged = self._client.get_run(self.run_id).data.params
        new = [Param(k, v) for k, v in values.items() if logged.get(k) != v]
        for chunk in _chunks(new, _BATCH_PARAMS_TAGS):
            self._client.log_batch(self.run_id, params=chunk)
        # Tags too, because the UI and search filter/group by tags more easily than by params.
        self.set_tags({f"ablate.{k}": v for k, v in values.items() if k.startswith("algo.")})

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        now, step = int(time.time() * 1000), int(step)
        for key, value in metrics.items():
            value = float(value)
            held = self._held.setdefault(key, set())
            # NaN is skipped: MLflow stores it but its UI and search choke on it
            if step not in held and not math.isnan(value):
                self._buffer.append((key, value, now, step))
                held.add(step)
        self._buffered_steps.add(int(step))
        full = len(self._buffer) >= FLUSH_EVERY_METRICS
        if full or len(self._buffered_steps) >= FLUSH_EVERY_STEPS:
            self._sender.submit(self._send, self._buffer)  # overlaps the next steps
            self._buffer, self._buffered_steps = [], set()

    def _send(self, rows: list[tuple[str, float, int, int]]) -> None:
        from mlflow.entities import Metric

        if rows and self._guard is not None:
            self._guard()
        metrics = [Metric(*row) for row in rows]  # built here, off the training thread
        for chunk in _chunks(metrics, _BATCH_METRICS):
            self._client.log_batch(self.run_id, metrics=chunk)

    def flush(self) -> None:
        """Send the buffered metrics now, and wait for any batch still being sent (sending also
        happens in the background every ~20 steps; flushed at each eval and on close)."""
        self._sender.wait()
        self._send(self._buffer)
        self._buffer, self._buffered_steps = [], set()

    def log_samples(self, name: str, records: Sequence[Mapping[str, Any]], step: int) -> None:
        """`samples/{name}_step{step:06d}.parquet` (parquet, not `log_table`, which breaks after
        ~80 tables per run)."""
        import pandas as pd

        self.flush()  # an eval is a natural point to make the curves current
        frame = pd.DataFrame([dict(r) for r in records])
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"{name}_step{step:06d}.parquet"
            try:
                frame.to_parquet(path, index=False)
            except (TypeError, ValueError):  # mixed-type object columns: store them as text
                frame.astype(
                    {c: str for c in frame.columns if frame[c].dtype == object}
                ).to_parquet(path, index=False)
            self._client.log_artifact(self.run_id, str(path), "samples")

    def set_tags(self, tags: Mapping[str, str]) -> None:
        self._sender.wait()
        _set_tags(self._client, self.run_id, tags)

    def log_dict(self, data: Mapping[str, Any], artifact_file: str) -> None:
        """`data` as a JSON artifact at `artifact_file` (e.g. "config.json")."""
        self._sender.wait()
        target = Path(artifact_file)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / target.name
            path.write_text(json.dumps(data, indent=2, default=str))
            parent = target.parent.as_posix()
            self._client.log_artifact(self.run_id, str(path), None if parent == "." else parent)

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        self._sender.wait()
        self._client.log_artifact(self.run_id, str(path), artifact_path)

    def close(self, status: str = "FINISHED") -> None:
        """Flush, then end the run with FINISHED, FAILED or KILLED. Closing twice is a no-op."""
        if self._closed:
            return
        status = _terminal(status)
        try:
            self.flush()
        finally:  # a failed flush must not leave the run RUNNING forever
            self._client.set_terminated(self.run_id, status)
            self._closed = True

    def __enter__(self) -> MLflowTracker:
        return self

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        self.close("FINISHED" if exc_type is None else "FAILED")


# The report's read-only queries live in `ablate.tracking.read`; imported last because they use
# this module's client and search helpers.
from ablate.tracking.read import (  # noqa: E402
    download_artifacts,
    list_artifacts,
    load_runs,
    metric_history,
    metric_rows_per_step,
    study_run_id,
)
