"""One run of the file store, as a folder:

    run.json        name, status, start / end time (ms)      JSON, replaced atomically
    tags.json       {tag: value}                             JSON, replaced atomically
    params.json     {param: value}                           JSON, replaced atomically
    metrics.jsonl   one line per (metric, step): {"k", "v", "s", "t"}, appended
    artifacts/      files logged by the run (samples, config.json, a report)

A JSON file is written to a temporary name, fsynced and renamed over the old one, so a reader or
a killed writer never leaves half a file; a read-modify-write holds the run's `fcntl` lock
(several processes may tag one run: the runner marking its plan, the trial's own process). Only
the process holding the trial's lease appends metrics; a line cut short by a kill has no newline
and is never read as a row, and the next process to open the run cuts it off before appending.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ablate.base import durable, faults
from ablate.base.errors import StoreError
from ablate.base.locks import file_lock
from ablate.base.store.common import (
    PARAM_MAX_CHARS,
    TAG_MAX_CHARS,
    MetricBuffer,
    MetricRow,
    RunTracker,
    dict_file,
    param_tags,
    samples_file,
    text_value,
)
from ablate.base.store.port import Guard

METRICS = "metrics.jsonl"


def write_json(path: Path, data: Any) -> None:
    """`data` as JSON at `path`, atomically (temporary file, fsync, rename)."""
    write_bytes(path, json.dumps(data, indent=1, sort_keys=True).encode())


def write_bytes(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with durable.named(tmp), os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_json(path: Path, fix: str) -> dict[str, Any]:
    """The JSON object at `path`; {} when there is none yet. A file that is not a whole JSON
    object (damaged: every write here is atomic, so a disk's fault or a hand's) is a
    `StoreError` naming it and `fix`."""
    found = durable.read_json(path, fix, missing={})
    if not isinstance(found, dict):
        raise StoreError(f"{path} is damaged (not a JSON object): {fix}")
    return found


def now_ms() -> int:
    return int(time.time() * 1000)


class RunFolder:
    """The files of one run (see the module doc); `run_id` is the folder's name."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.run_id = folder.name

    @classmethod
    def create(cls, runs: Path, *, name: str, tags: Mapping[str, str]) -> RunFolder:
        """A new RUNNING run under the folder `runs`."""
        folder = runs / uuid.uuid4().hex
        (folder / "artifacts").mkdir(parents=True)
        run = cls(folder)
        write_json(folder / "tags.json", dict(tags))
        start = {"start_time": now_ms(), "created_ns": time.time_ns()}
        # run.json last: a folder without it (a kill during creation) is not a run yet
        write_json(folder / "run.json", {"name": name, "status": "RUNNING", **start})
        return run

    def exists(self) -> bool:
        return (self.folder / "run.json").is_file()

    def _read(self, name: str) -> dict[str, Any]:
        return read_json(
            self.folder / name,
            f"restore it from a copy, or move the run's folder {self.folder} out of the store "
            "(the next `ablate run` makes it again: a trial's run by training the trial again)",
        )

    def info(self) -> dict[str, Any]:
        return self._read("run.json")

    def tags(self) -> dict[str, str]:
        return self._read("tags.json")

    def params(self) -> dict[str, str]:
        return self._read("params.json")

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with file_lock(self.folder / ".lock"):
            yield

    def update_tags(self, tags: Mapping[str, str]) -> None:
        if not tags:
            return
        with self._locked():
            write_json(self.folder / "tags.json", {**self.tags(), **tags})

    def log_params(self, params: Mapping[str, str]) -> None:
        """Params are immutable: an identical one again is skipped, a changed one raises."""
        with self._locked():
            logged = self.params()
            changed = sorted(k for k, v in params.items() if k in logged and logged[k] != v)
            if changed:
                raise ValueError(f"run {self.run_id}: params {changed} changed value")
            if any(k not in logged for k in params):
                write_json(self.folder / "params.json", {**logged, **params})

    def set_status(self, status: str) -> None:
        """RUNNING (reopened: no end time), or a terminal status ended now."""
        with self._locked():
            info = self.info()
            info.update(status=status, end_time=None if status == "RUNNING" else now_ms())
            write_json(self.folder / "run.json", info)

    def append_metrics(self, rows: list[MetricRow]) -> None:
        """Append `rows` and fsync. Written in two parts around the fault point
        `metrics_append` (at the last row's step), so a test can kill the process with a line
        half on disk: what a kill during any append can leave."""
        if not rows:
            return
        lines = [json.dumps({"k": k, "v": v, "t": t, "s": s}) + "\n" for k, v, t, s in rows]
        data = "".join(lines).encode()
        cut = len(data) - len(lines[-1]) // 2  # inside the last line
        path = self.folder / METRICS
        with durable.named(path):
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                _write_all(fd, data[:cut])
                faults.point("metrics_append", rows[-1][3])
                _write_all(fd, data[cut:])
                os.fsync(fd)
            finally:
                os.close(fd)

    def metric_rows(self) -> list[MetricRow]:
        """Every complete metric line, in the order written; a torn last line is no row."""
        try:
            text = (self.folder / METRICS).read_bytes().decode(errors="replace")
        except FileNotFoundError:
            return []
        rows, damaged = [], []
        for number, line in enumerate(text.split("\n")[:-1], 1):  # after the last newline: torn
            try:
                row = json.loads(line)
                rows.append((str(row["k"]), float(row["v"]), int(row["t"]), int(row["s"])))
            except (ValueError, KeyError, TypeError):
                damaged.append(number)  # not a row (a disk's fault or a hand's): never counted
        if damaged:
            warnings.warn(
                f"{self.folder / METRICS}: line(s) {', '.join(map(str, damaged[:5]))} of "
                f"{number} are not metric rows (damaged): they are skipped; restore the file "
                "from a copy to keep them",
                durable.UnreadableFileWarning,
                stacklevel=2,
            )
        return rows

    def cut_torn_line(self) -> None:
        """Cut a last line a kill left without its newline, so the next append starts a line
        (called by the process that now holds the trial's lease, before it appends)."""
        path = self.folder / METRICS
        with self._locked(), contextlib.suppress(FileNotFoundError):
            data = path.read_bytes()
            if data and not data.endswith(b"\n"):
                with open(path, "r+b") as handle:
                    handle.truncate(data.rfind(b"\n") + 1)
                    os.fsync(handle.fileno())

    def held_steps(self) -> dict[str, set[int]]:
        """metric -> the steps the run holds (what a resumed trial must not log again)."""
        held: dict[str, set[int]] = {}
        for key, _, _, step in self.metric_rows():
            held.setdefault(key, set()).add(step)
        return held

    def last_metrics(self) -> dict[str, float]:
        """Each metric's value at its highest step (the later line on a tie), as MLflow's
        latest value."""
        last: dict[str, tuple[int, float]] = {}
        for key, value, _, step in self.metric_rows():
            if key not in last or step >= last[key][0]:
                last[key] = (step, value)
        return {k: v for k, (_, v) in last.items()}

    def artifact(self, path: str = "") -> Path:
        root = (self.folder / "artifacts").resolve()
        target = (root / path).resolve()
        if target != root and root not in target.parents:
            raise ValueError(f"artifact path {path!r} leaves the run's artifacts")
        return target

    def add_artifact(self, file: Path, artifact_dir: str = "") -> None:
        """Copy `file` into the artifacts under `artifact_dir`, atomically."""
        folder = self.artifact(artifact_dir)
        folder.mkdir(parents=True, exist_ok=True)
        write_bytes(folder / file.name, Path(file).read_bytes())

    def copy_artifacts(self, path: str, dst: Path) -> Path:
        """Copy artifact `path` (file or folder) to `dst/path`; returns that local path."""
        source, target = self.artifact(path), Path(dst) / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            shutil.copyfile(source, target)
        return target


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class FileTracker(RunTracker):
    """A `Tracker` writing to one `RunFolder`. Metrics are buffered (as the MLflow tracker's:
    written every ~20 steps, at each eval and on close) and appended by this process only."""

    def __init__(
        self, run: RunFolder, *, held: dict[str, set[int]] | None = None, guard: Guard | None = None
    ) -> None:
        self.run, self.run_id = run, run.run_id
        self._buffer = MetricBuffer(held)
        self._guard = guard

    def _check(self) -> None:
        if self._guard is not None:
            self._guard()

    def log_params(self, params: Mapping[str, Any]) -> None:
        values = {k: text_value(v)[:PARAM_MAX_CHARS] for k, v in params.items()}
        self.run.log_params(values)
        self.set_tags(param_tags(values))

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        if self._buffer.add(metrics, step):
            self.flush()

    def flush(self) -> None:
        rows = self._buffer.peek()
        if rows:
            self._check()
            self.run.append_metrics(rows)
        self._buffer.take()

    def log_samples(self, name: str, records: Sequence[Mapping[str, Any]], step: int) -> None:
        """`samples/{name}_step{step:06d}.parquet`, as the MLflow tracker writes them."""
        self.flush()
        with samples_file(name, records, step) as path:
            self.run.add_artifact(path, "samples")

    def set_tags(self, tags: Mapping[str, str]) -> None:
        self.run.update_tags({k: text_value(v)[:TAG_MAX_CHARS] for k, v in tags.items()})

    def log_dict(self, data: Mapping[str, Any], artifact_file: str) -> None:
        with dict_file(data, artifact_file) as (path, folder):
            self.run.add_artifact(path, folder)

    def _end(self, status: str) -> None:
        self.run.set_status(status)
