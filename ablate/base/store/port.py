"""The tracking port: what a trial logs through (`Tracker`) and what orchestration and the
report see of a results store (`StudyStore`, `StudyRun`; its runs as a `RunTable`, its tags from
`ablate.base.store.tags`), and how a store may classify its own failures (`StoreFailures`).
Every adapter (MLflow, the file store) and every consumer (runner, report, commands) depends on
these modules, never on an adapter; they import nothing of ablate above them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ablate.base.store.table import RunTable

#: The statuses a run can end with; RUNNING while it is open.
TERMINAL = ("FINISHED", "FAILED", "KILLED")
#: Metric names every store accepts: alphanumerics, _ - . space : /
METRIC_NAME = re.compile(r"[\w\-. :/]+")


def terminal(status: str) -> str:
    """`status` if a run may end with it, else ValueError."""
    if status not in TERMINAL:
        raise ValueError(f"status must be one of {', '.join(TERMINAL)}, got {status!r}")
    return status


# --- what a trial logs through --------------------------------------------------------------------


@runtime_checkable
class Tracker(Protocol):
    def log_params(self, params: Mapping[str, Any]) -> None: ...
    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None: ...
    def log_samples(self, name: str, records: Sequence[Mapping[str, Any]], step: int) -> None: ...
    def set_tags(self, tags: Mapping[str, str]) -> None: ...
    def log_dict(self, data: Mapping[str, Any], artifact_file: str) -> None: ...
    def flush(self) -> None:
        """Make everything logged so far durable (the trainer calls it before a checkpoint)."""
        ...

    def close(self, status: str = "FINISHED") -> None: ...


class NullTracker:
    """Discards everything."""

    def log_params(self, params: Mapping[str, Any]) -> None:
        pass

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        pass

    def log_samples(self, name: str, records: Sequence[Mapping[str, Any]], step: int) -> None:
        pass

    def set_tags(self, tags: Mapping[str, str]) -> None:
        pass

    def log_dict(self, data: Mapping[str, Any], artifact_file: str) -> None:
        pass

    def flush(self) -> None:
        pass

    def close(self, status: str = "FINISHED") -> None:
        pass


class MemoryTracker:
    """Keeps everything in memory (tests, notebooks, the quick smoke path)."""

    def __init__(self) -> None:
        self.params: dict[str, Any] = {}
        self.tags: dict[str, str] = {}
        self.metrics: list[tuple[int, dict[str, float]]] = []
        self.samples: list[tuple[str, int, list[dict[str, Any]]]] = []
        self.dicts: dict[str, dict[str, Any]] = {}
        self.status: str | None = None

    def log_params(self, params: Mapping[str, Any]) -> None:
        self.params.update(params)

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        # the names every store accepts, checked here so fast tests catch a name MLflow rejects
        bad = [k for k in metrics if not METRIC_NAME.fullmatch(k)]
        if bad:
            raise ValueError(f"metric names MLflow would reject: {bad}")
        self.metrics.append((step, dict(metrics)))

    def log_samples(self, name: str, records: Sequence[Mapping[str, Any]], step: int) -> None:
        self.samples.append((name, step, [dict(r) for r in records]))

    def set_tags(self, tags: Mapping[str, str]) -> None:
        self.tags.update(tags)

    def log_dict(self, data: Mapping[str, Any], artifact_file: str) -> None:
        self.dicts[artifact_file] = dict(data)

    def flush(self) -> None:
        pass

    def close(self, status: str = "FINISHED") -> None:
        self.status = status

    def history(self, key: str) -> list[tuple[int, float]]:
        """[(step, value)] of one metric in logging order."""
        return [(s, m[key]) for s, m in self.metrics if key in m]

    def last(self, key: str) -> float:
        values = self.history(key)
        if not values:
            raise KeyError(f"metric {key!r} was never logged")
        return values[-1][1]


# --- a results store ------------------------------------------------------------------------------

#: Called before each write of a trial's run; raises when this process may no longer write it.
Guard = Callable[[], None]


@runtime_checkable
class StudyRun(Protocol):
    """A study's parent run, opened: hands out one run (a `Tracker`) per trial."""

    study_name: str
    run_id: str

    def set_tags(self, tags: Mapping[str, str]) -> None: ...

    def trial_status(self) -> dict[str, str]:
        """trial_id -> status of its run; FINISHED wins over duplicates, else the latest."""
        ...

    def trial_tracker(
        self, trial_id: str, *, run_name: str, tags: Mapping[str, str], guard: Guard | None = None
    ) -> Tracker:
        """The run of `trial_id`: its unfinished run resumed (`RESUMES` counted; the tracker then
        skips every (metric, step) the run holds), else a new one. A FINISHED trial raises
        ValueError: it is never trained again. `guard()` runs before each write."""
        ...

    def mark_plan(self, trial_ids: set[str]) -> int:
        """Tag every trial run with whether its trial is in the plan `trial_ids` (`CURRENT`);
        the number tagged "false" (the runs of trials an edited study dropped)."""
        ...

    def attach(self, path: str | Path, prefix: str = "") -> None:
        """Log a file, or every file of a folder, as artifacts under `prefix`; the run's status
        stays what it is."""
        ...

    def close(self, status: str = "FINISHED") -> None: ...


@runtime_checkable
class StudyStore(Protocol):
    """Where studies' runs live, chosen by the URI's scheme (`ablate.tracking.open_store`).
    Creating the object touches nothing; `init` creates what the store needs. What a store may
    add besides: its own failures (`StoreFailures`), its own place for trial leases
    (`ablate.base.store.leases.LeasePort`), a browser UI (`ablate.base.store.ui.HasUI`)."""

    uri: str
    kind: str  # how the CLI names it, e.g. "MLflow database", "file store"

    def init(self) -> None:
        """Create the store (schema, folders) once, before processes fan out. Idempotent."""
        ...

    def exists(self) -> bool:
        """Whether the store was ever created (reading one that was not would create it)."""
        ...

    def write_problem(self) -> str | None:
        """Why an existing store cannot be written, in one line (checked before compute)."""
        ...

    def open_study(self, name: str, *, experiment: str | None = None) -> StudyRun:
        """The study's parent run, created when missing, set RUNNING when it exists. Open it
        once in the coordinating process before fanning out, so that workers find it."""
        ...

    def find_study(self, name: str) -> StudyRun | None:
        """The study's parent run as it is (its status untouched), or None."""
        ...

    def runs(self, study_name: str) -> RunTable:
        """The study's trial runs of its current plan, oldest first (read-only)."""
        ...

    def metric_history(self, run_id: str, key: str) -> list[tuple[int, float]]:
        """[(step, value)] of one metric in step order; a step held twice keeps the later."""
        ...

    def metric_rows_per_step(self, run_id: str, key: str) -> dict[int, int]:
        """{step: rows the store holds for `key` at that step}: more than 1 is a duplicate."""
        ...

    def list_artifacts(self, run_id: str, path: str | None = None) -> list[str]:
        """Artifact paths of a run directly under `path` (e.g. "samples"); [] when none."""
        ...

    def download_artifacts(self, run_id: str, path: str, dst: str | Path) -> Path:
        """Copy a run's artifact `path` (file or folder) under `dst`; returns the local path."""
        ...


@runtime_checkable
class StoreFailures(Protocol):
    """A store that tells its own failures (its database, its tracking server) from a trial's
    errors. Optional: `ablate.tracking.is_failure` counts only the disk's for a store without it."""

    def is_failure(self, exc: BaseException) -> bool:
        """Whether `exc` is a failure of this store, not of a trial: the study stops with one
        line, and retrying later can succeed."""
        ...
