"""What every store adapter shares: the run-environment and algorithm-diff tags, values as text,
batching, a background sender, and which errors are the disk's."""

from __future__ import annotations

import contextlib
import json
import math
import platform
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from ablate.base.durable import is_disk_error
from ablate.base.store import tags as tag
from ablate.base.store.port import terminal

#: The longest tag value a store keeps (MLflow's REST API rejects longer ones).
TAG_MAX_CHARS = 5000
#: The longest param value a store keeps.
PARAM_MAX_CHARS = 6000
# One store write per ~20 steps instead of one per step (an MLflow call costs ~11 ms on sqlite, ~5%
# of a tiny model's step); a killed trial loses at most these steps' metrics, as it resumes from a
# checkpoint.
FLUSH_EVERY_STEPS = 20
FLUSH_EVERY_METRICS = 900
#: A buffered metric row: (key, value, timestamp in ms, step).
MetricRow = tuple[str, float, int, int]


def disk_failure(exc: BaseException) -> bool:
    """A read-only, forbidden or full disk: the store's (or a checkpoint's) fault, not a trial's."""
    return is_disk_error(exc)


def raised_by(exc: BaseException, packages: tuple[str, ...]) -> bool:
    """Whether `exc`'s class comes from one of the top-level `packages`."""
    return type(exc).__module__.split(".")[0] in packages


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def environment_tags() -> dict[str, str]:
    """Git commit of the code (plus whether the tree had uncommitted changes) and versions."""
    commit = _git("rev-parse", "HEAD")
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    tags = {
        tag.GIT_COMMIT: commit or "unknown",
        tag.GIT_DIRTY: "unknown" if dirty is None else str(bool(dirty)).lower(),
        f"{tag.VERSION}python": platform.python_version(),
    }
    for package in ("ablate", "torch", "transformers", "mlflow"):
        try:
            tags[f"{tag.VERSION}{package}"] = metadata.version(package)
        except metadata.PackageNotFoundError:
            tags[f"{tag.VERSION}{package}"] = "not installed"
    return tags


def artifact_files(path: str | Path, prefix: str = "") -> list[tuple[Path, str]]:
    """(file, artifact folder) for `path` (a file, or every file under a folder, in order) logged
    under `prefix`: a folder's layout is kept below `prefix`; "" is the artifact root."""
    path = Path(path)
    if not path.is_dir():
        return [(path, prefix)]
    out = []
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        relative = file.parent.relative_to(path).as_posix()
        out.append((file, "/".join(p for p in (prefix, relative) if p not in ("", "."))))
    return out


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
    """`DIFF_FIELD + <field>` = this arm's value for each field that differs from the reference
    arm, and a one-line `DIFF` summary ("clip_high=0.28, loss_agg=token_mean", or "none")."""
    diff = {k: text_value(mine) for k, (mine, _) in algo.diff(reference_algo).items()}
    tags = {f"{tag.DIFF_FIELD}{k}": v[:TAG_MAX_CHARS] for k, v in diff.items()}
    summary = ", ".join(f"{k}={v}" for k, v in diff.items()) or "none"
    tags[tag.DIFF] = summary[:TAG_MAX_CHARS]
    return tags


def param_tags(params: Mapping[str, str]) -> dict[str, str]:
    """The Algorithm params (`algo.*`) mirrored as tags (`ALGO_FIELD*`): a UI and a search
    filter and group by tags more easily than by params."""
    prefix = "algo."
    return {tag.ALGO_FIELD + k[len(prefix) :]: v for k, v in params.items() if k.startswith(prefix)}


class MetricBuffer:
    """Metrics waiting to be written, each (metric, step) once: a step the run already holds
    (`held`: metric -> steps, read back when a trial resumes and recomputes the steps after its
    checkpoint) or logged twice in this process is dropped, and so is NaN (stores and their UIs
    choke on it)."""

    def __init__(self, held: dict[str, set[int]] | None = None) -> None:
        self._held: dict[str, set[int]] = held if held is not None else {}
        self._rows: list[MetricRow] = []
        self._steps: set[int] = set()

    def add(self, metrics: Mapping[str, float], step: int) -> bool:
        """Buffer `metrics` of `step`; True when the buffer is due to be written."""
        now, step = int(time.time() * 1000), int(step)
        for key, value in metrics.items():
            value = float(value)
            held = self._held.setdefault(key, set())
            if step not in held and not math.isnan(value):
                self._rows.append((key, value, now, step))
                held.add(step)
        self._steps.add(step)
        return len(self._rows) >= FLUSH_EVERY_METRICS or len(self._steps) >= FLUSH_EVERY_STEPS

    def peek(self) -> list[MetricRow]:
        """The buffered rows, oldest first, still buffered (until `take`)."""
        return list(self._rows)

    def take(self) -> list[MetricRow]:
        """The buffered rows, oldest first; the buffer is empty afterwards."""
        rows, self._rows, self._steps = self._rows, [], set()
        return rows


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


@contextlib.contextmanager
def samples_file(name: str, records: Sequence[Mapping[str, Any]], step: int) -> Iterator[Path]:
    """The eval samples as a temporary `{name}_step{step:06d}.parquet` for a store to keep
    under `samples/` (parquet, not MLflow's `log_table`, which breaks after ~80 tables a run)."""
    import pandas as pd

    frame = pd.DataFrame([dict(r) for r in records])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}_step{step:06d}.parquet"
        try:
            frame.to_parquet(path, index=False)
        except (TypeError, ValueError):  # mixed-type object columns: store them as text
            text = {c: str for c in frame.columns if frame[c].dtype == object}
            frame.astype(text).to_parquet(path, index=False)
        yield path


@contextlib.contextmanager
def dict_file(data: Mapping[str, Any], artifact_file: str) -> Iterator[tuple[Path, str]]:
    """`data` as a temporary JSON file named like `artifact_file` ("config.json", "a/b.json"),
    and the artifact folder it belongs in ("" for the run's own)."""
    target = Path(artifact_file)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / target.name
        path.write_text(json.dumps(data, indent=2, default=str))
        folder = target.parent.as_posix()
        yield path, "" if folder == "." else folder


class RunTracker:
    """What every store's trial tracker does at its end: flush, then end the run with FINISHED,
    FAILED or KILLED, once (closing twice is a no-op); as a context manager it closes FAILED on
    an exception. A store's tracker gives `flush` and `_end(status)`."""

    _closed = False

    def flush(self) -> None:
        raise NotImplementedError

    def _end(self, status: str) -> None:
        raise NotImplementedError

    def close(self, status: str = "FINISHED") -> None:
        if self._closed:
            return
        status = terminal(status)
        try:
            self.flush()
        finally:  # a failed flush must not leave the run RUNNING forever
            self._end(status)
            self._closed = True

    def __enter__(self):
        return self

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        self.close("FINISHED" if exc_type is None else "FAILED")
