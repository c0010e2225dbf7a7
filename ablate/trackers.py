"""The tracker interface every trial logs through, with the no-op and in-memory trackers and the
run-environment tags. Kept apart from `ablate.tracking` (the MLflow side, the only module that
imports mlflow) so code and tests that never touch MLflow need not read it."""

from __future__ import annotations

import json
import platform
import re
import subprocess
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

#: What MLflow allows in a metric name: alphanumerics, _ - . space : /
METRIC_NAME = re.compile(r"[\w\-. :/]+")


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
        # the names MLflow accepts, checked here so fast tests catch a name MLflow would reject
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


# --- MLflow ---------------------------------------------------------------------------------------

# MLflow's limits (its REST API rejects longer values), so values are truncated here.


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def cpu_model() -> str:
    """The CPU's model name (float kernels, and so bit-exact results, depend on it)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def environment_tags() -> dict[str, str]:
    """Git commit of the code (plus whether the tree had uncommitted changes) and versions."""
    commit = _git("rev-parse", "HEAD")
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    tags = {
        "ablate.git.commit": commit or "unknown",
        "ablate.git.dirty": "unknown" if dirty is None else str(bool(dirty)).lower(),
        "ablate.version.python": platform.python_version(),
    }
    for package in ("ablate", "torch", "transformers", "mlflow"):
        try:
            tags[f"ablate.version.{package}"] = metadata.version(package)
        except metadata.PackageNotFoundError:
            tags[f"ablate.version.{package}"] = "not installed"
    return tags


class Background:
    """Runs one call at a time on a worker thread, so a slow store write (an MLflow metric batch
    to sqlite takes ~0.1-0.3 s) overlaps the next training step instead of stalling it. `wait`
    joins the call in flight and re-raises its error; callers wait before any other write, so
    the store never sees two writers from this process."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def submit(self, fn: Callable[..., object], *args: Any) -> None:
        self.wait()
        self._thread = threading.Thread(target=self._run, args=(fn, *args), daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[..., object], *args: Any) -> None:
        try:
            fn(*args)
        except BaseException as exc:  # handed to the caller's thread by `wait`
            self._error = exc

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise error


#: MLflow's limit on a tag value's length.
TAG_MAX_CHARS = 5000


def chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def text_value(value: Any) -> str:
    """A param/tag value as text: JSON for containers (tuples read back as lists), else str."""
    if isinstance(value, str):
        return value
    if isinstance(value, (tuple, list, dict)):
        return json.dumps(value, default=str)
    return str(value)


def algorithm_diff_tags(algo: Any, reference_algo: Any) -> dict[str, str]:
    """`ablate.diff.<field>` = this arm's value for each field that differs from the reference
    arm, and a one-line `ablate.diff` summary ("clip_high=0.28, loss_agg=token_mean", or "none")."""
    diff = {k: text_value(mine) for k, (mine, _) in algo.diff(reference_algo).items()}
    tags = {f"ablate.diff.{k}": v[:TAG_MAX_CHARS] for k, v in diff.items()}
    summary = ", ".join(f"{k}={v}" for k, v in diff.items()) or "none"
    tags["ablate.diff"] = summary[:TAG_MAX_CHARS]
    return tags
