"""The file store: a `StudyStore` in a folder, chosen by a `jsonl:///abs/folder` URI (a scheme
MLflow does not use). Plain files any tool can read, no database and no server; no UI (`ablate
report` reads it), and only the disk's failures (the core port plus its leases' place).

    <folder>/leases.db                  the trial leases (sqlite)
    <folder>/<study>-<hash>/study.json  the study's name and its parent run's id
    <folder>/<study>-<hash>/runs/<id>/  the parent run and one run per trial (`files_run`)

Several processes may share it on one machine (`ablate run --workers N`, concurrent runners):
the parent run and a trial's run are found or created under the study's `fcntl` lock, a run's
JSON files are rewritten under the run's, and a trial's metrics are appended only by the process
holding its lease.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from pathlib import Path

from ablate.base.errors import ConfigError
from ablate.base.locks import file_lock
from ablate.base.store.common import artifact_files
from ablate.base.store.port import Guard, terminal
from ablate.base.store.table import RunRecord, RunTable
from ablate.base.store.tags import CURRENT, KIND, PLAN_MARKED, RESUMES, STUDY, TRIAL_ID
from ablate.tracking.files_run import FileTracker, RunFolder, read_json, write_json
from ablate.tracking.sql_leases import LeaseStore

SCHEME = "jsonl://"


def folder_of(uri: str) -> Path:
    """The folder of a `jsonl:///abs/folder` URI."""
    path = uri[len(SCHEME) :] if uri.startswith(SCHEME) else ""
    if not path.startswith("/"):
        raise ConfigError(f"file store {uri!r}: give an absolute folder, jsonl:///abs/folder")
    return Path(path).resolve()


def _runs(folder: Path) -> list[RunFolder]:
    """The runs under a study folder, oldest first (a folder a kill left half-made is none)."""
    found = [RunFolder(p) for p in (folder / "runs").glob("*") if p.is_dir()]
    runs = [(run.info(), run) for run in found if run.exists()]
    runs.sort(key=lambda pair: (pair[0].get("created_ns", 0), pair[1].run_id))
    return [run for _, run in runs]


class FileStudy:
    """A study's parent run in the file store; hands out one run (a `FileTracker`) per trial."""

    def __init__(self, folder: Path, study_name: str, run_id: str) -> None:
        self.folder, self.study_name, self.run_id = folder, study_name, run_id
        self._parent = RunFolder(folder / "runs" / run_id)

    def trial_runs(self, trial_id: str | None = None) -> list[RunFolder]:
        """The study's trial runs (of `trial_id` when given), oldest first."""
        runs = [r for r in _runs(self.folder) if r.tags().get(KIND) == "trial"]
        return runs if trial_id is None else [r for r in runs if r.tags().get(TRIAL_ID) == trial_id]

    def set_tags(self, tags: Mapping[str, str]) -> None:
        self._parent.update_tags(dict(tags))

    def attach(self, path: str | Path, prefix: str = "") -> None:
        """Copy a file, or every file of a folder, into the artifacts under `prefix`; the
        run's status stays what it is."""
        for file, folder in artifact_files(path, prefix):
            self._parent.add_artifact(file, folder)

    def trial_status(self) -> dict[str, str]:
        status: dict[str, str] = {}
        for run in self.trial_runs():  # oldest first: a later run overrides an earlier one
            trial_id = run.tags().get(TRIAL_ID)
            if trial_id is not None and status.get(trial_id) != "FINISHED":
                status[trial_id] = run.info().get("status", "RUNNING")
        return status

    def trial_tracker(
        self, trial_id: str, *, run_name: str, tags: Mapping[str, str], guard: Guard | None = None
    ) -> FileTracker:
        """The run of `trial_id`: its unfinished run resumed (held steps skipped), else a new
        one; a FINISHED trial raises ValueError."""
        with file_lock(self.folder / ".lock"):
            runs = self.trial_runs(trial_id)
            finished = [r.run_id for r in runs if r.info().get("status") == "FINISHED"]
            if finished:
                raise ValueError(f"trial {trial_id} already has a FINISHED run ({finished[0]})")
            if runs:
                run = runs[-1]
                run.cut_torn_line()
                run.set_status("RUNNING")
                resumes = int(run.tags().get(RESUMES, "0")) + 1
                tags = {**tags, RESUMES: str(resumes)}
            else:
                identity = {KIND: "trial", STUDY: self.study_name, TRIAL_ID: trial_id}
                run = RunFolder.create(self.folder / "runs", name=run_name, tags=identity)
        tracker = FileTracker(run, held=run.held_steps(), guard=guard)
        tracker.set_tags(tags)
        return tracker

    def mark_plan(self, trial_ids: set[str]) -> int:
        dropped = 0
        for run in self.trial_runs():
            current = "true" if run.tags().get(TRIAL_ID) in trial_ids else "false"
            dropped += current == "false"
            if run.tags().get(CURRENT) != current:
                run.update_tags({CURRENT: current})
        self.set_tags({PLAN_MARKED: "true", CURRENT: "true"})
        return dropped

    def reopen(self) -> None:
        """RUNNING again (a study that is being run), unless it already is."""
        if self._parent.info().get("status") != "RUNNING":
            self._parent.set_status("RUNNING")

    def close(self, status: str = "FINISHED") -> None:
        self._parent.set_status(terminal(status))


class FileStore:
    """A `StudyStore` in the folder of a `jsonl:///abs/folder` URI (see the module doc), keeping
    its trial leases there too (`LeasePort`)."""

    kind = "file store"

    def __init__(self, uri: str) -> None:
        self.uri, self.root = uri, folder_of(uri)

    def init(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)

    def exists(self) -> bool:
        return self.root.is_dir()

    def write_problem(self) -> str | None:
        if self.root.exists() and not (self.root.is_dir() and os.access(self.root, os.W_OK)):
            return f"file store {self.root} is not a writable folder"
        return None

    def _study_folder(self, name: str) -> Path:
        slug = re.sub(r"[^A-Za-z0-9_.-]", "-", name)[:80]
        return self.root / f"{slug}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"

    def open_study(self, name: str, *, experiment: str | None = None) -> FileStudy:
        """The study's parent run, created when missing, set RUNNING when it exists (the file
        store has no experiments: `experiment` is accepted and unused)."""
        folder = self._study_folder(name)
        (folder / "runs").mkdir(parents=True, exist_ok=True)
        with file_lock(folder / ".lock"):
            study = self.find_study(name)
            if study is None:
                parent = RunFolder.create(
                    folder / "runs", name=name, tags={KIND: "study", STUDY: name}
                )
                write_json(folder / "study.json", {"name": name, "parent": parent.run_id})
                return FileStudy(folder, name, parent.run_id)
        study.reopen()
        return study

    def find_study(self, name: str) -> FileStudy | None:
        folder = self._study_folder(name)
        fix = (
            f"restore it from a copy, or move the study's folder {folder} out of the store "
            "(its trials then train again)"
        )
        parent = read_json(folder / "study.json", fix).get("parent")
        return None if parent is None else FileStudy(folder, name, parent)

    def runs(self, study_name: str) -> RunTable:
        study = self.find_study(study_name)
        runs = [] if study is None else study.trial_runs()
        return RunTable.from_records(_record(run) for run in runs)

    def _run(self, run_id: str) -> RunFolder:
        if not re.fullmatch(r"[0-9a-f]{32}", run_id):
            raise ValueError(f"not a run id of the file store: {run_id!r}")
        for folder in self.root.glob(f"*/runs/{run_id}"):
            return RunFolder(folder)
        raise ValueError(f"no run {run_id} in {self.root}")

    def metric_history(self, run_id: str, key: str) -> list[tuple[int, float]]:
        curve = {s: v for k, v, _, s in self._run(run_id).metric_rows() if k == key}
        return sorted(curve.items())  # a step held twice keeps the later line

    def metric_rows_per_step(self, run_id: str, key: str) -> dict[int, int]:
        counts: dict[int, int] = {}
        for k, _, _, step in self._run(run_id).metric_rows():
            if k == key:
                counts[step] = counts.get(step, 0) + 1
        return counts

    def list_artifacts(self, run_id: str, path: str | None = None) -> list[str]:
        folder = self._run(run_id).artifact(path or "")
        if not folder.is_dir():
            return []
        names = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
        return ["/".join(p for p in (path, name) if p) for name in names]

    def download_artifacts(self, run_id: str, path: str, dst: str | Path) -> Path:
        return self._run(run_id).copy_artifacts(path, Path(dst))

    def leases(self, results_root: Path) -> LeaseStore:
        """In `leases.db` in the store's folder, wherever the results folder is."""
        return LeaseStore.in_folder(self.root)


def _record(run: RunFolder) -> RunRecord:
    info = run.info()
    return RunRecord(
        run_id=run.run_id,
        status=info.get("status", "RUNNING"),
        run_name=info.get("name", ""),
        start_time=info.get("start_time"),
        end_time=info.get("end_time"),
        tags=run.tags(),
        params=run.params(),
        metrics=run.last_metrics(),
    )
