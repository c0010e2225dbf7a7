"""`MLflowTracker`: a `Tracker` writing to one MLflow run, its metrics buffered and sent in the
background; a resumed run skips every (metric, step) it already holds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ablate.base.store.common import (
    PARAM_MAX_CHARS,
    Background,
    MetricBuffer,
    MetricRow,
    RunTracker,
    chunks,
    dict_file,
    param_tags,
    samples_file,
    text_value,
)
from ablate.base.store.port import Guard
from ablate.tracking.mlflow_client import BATCH_PARAMS_TAGS, client, set_tags

_BATCH_METRICS = 1000


def held_steps(api: Any, run: Any) -> dict[str, set[int]]:
    """metric -> the steps a run already holds (what a resumed trial must not log again)."""
    run_id = run.info.run_id
    return {k: {m.step for m in api.get_metric_history(run_id, k)} for k in run.data.metrics}


class MLflowTracker(RunTracker):
    """A `Tracker` writing to one MLflow run. Metrics are buffered: call `close` (or use it as a
    context manager, which closes FAILED on an exception) so the tail is not lost."""

    def __init__(
        self,
        uri: str,
        run_id: str,
        *,
        api: Any = None,
        held: dict[str, set[int]] | None = None,
        guard: Guard | None = None,
    ) -> None:
        self.uri, self.run_id = uri, run_id
        self._client = api if api is not None else client(uri)
        self._buffer = MetricBuffer(held)
        self._sender = Background()
        self._guard = guard

    def log_params(self, params: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        self._sender.wait()
        values = {k: text_value(v)[:PARAM_MAX_CHARS] for k, v in params.items()}
        # Params are immutable; re-logging an identical one on resume is skipped, a changed one
        # still raises (it would mean the trial's definition changed under the same id).
        logged = self._client.get_run(self.run_id).data.params
        new = [Param(k, v) for k, v in values.items() if logged.get(k) != v]
        for chunk in chunks(new, BATCH_PARAMS_TAGS):
            self._client.log_batch(self.run_id, params=chunk)
        self.set_tags(param_tags(values))

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        if self._buffer.add(metrics, step):
            self._sender.submit(self._send, self._buffer.take())  # overlaps the next steps

    def _send(self, rows: list[MetricRow]) -> None:
        from mlflow.entities import Metric

        if rows and self._guard is not None:
            self._guard()
        metrics = [Metric(*row) for row in rows]  # built here, off the training thread
        for chunk in chunks(metrics, _BATCH_METRICS):
            self._client.log_batch(self.run_id, metrics=chunk)

    def flush(self) -> None:
        """Send the buffered metrics now, and wait for any batch still being sent (sending also
        happens in the background every ~20 steps; flushed at each eval and on close)."""
        self._sender.wait()
        self._send(self._buffer.peek())  # kept buffered should the send fail
        self._buffer.take()

    def log_samples(self, name: str, records: Sequence[Mapping[str, Any]], step: int) -> None:
        """`samples/{name}_step{step:06d}.parquet` (`common.samples_file`)."""
        self.flush()  # an eval is a natural point to make the curves current
        with samples_file(name, records, step) as path:
            self._client.log_artifact(self.run_id, str(path), "samples")

    def set_tags(self, tags: Mapping[str, str]) -> None:
        self._sender.wait()
        set_tags(self._client, self.run_id, tags)

    def log_dict(self, data: Mapping[str, Any], artifact_file: str) -> None:
        """`data` as a JSON artifact at `artifact_file` (e.g. "config.json")."""
        self._sender.wait()
        with dict_file(data, artifact_file) as (path, folder):
            self._client.log_artifact(self.run_id, str(path), folder or None)

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        self._sender.wait()
        self._client.log_artifact(self.run_id, str(path), artifact_path)

    def _end(self, status: str) -> None:
        self._client.set_terminated(self.run_id, status)
