"""What a Slurm array task does, and what the submitting side reads back; no submitit here.

A submission is a readable JSON file in the results folder (study file, results store, the
trials with their specs): an array task gets its path and one trial id (plain strings: nothing
a user could not read back is pickled), loads the study file, and trains that trial through
`ablate.study.runner.run_trial`, the code path of a local trial: under the trial's lease, into
its one run of the results store, resuming from the trial's last checkpoint."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import socket
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ablate import tracking
from ablate.base import durable
from ablate.base.errors import Interrupted, StudyError
from ablate.base.threads import apply_threads
from ablate.study import runner
from ablate.study.identity import identified_trials
from ablate.study.lease import owner_is_dead
from ablate.study.runner import LEASED_ELSEWHERE, RunHooks, TrialOutcome, results_paths
from ablate.study.study import Study, Trial, load_study
from ablate.study.tune_phase import chosen_settings

#: The submissions of a study live in RESULTS/<study>/slurm/ (submitit's logs in logs/ there).
FOLDER = "slurm"
#: How long a task waits for a trial leased by another runner before leaving it to that runner:
#: past one lease TTL a dead holder's lease has expired (on another node too) and is taken over.
LEASE_WAIT_S = 90.0


def slurm_folder(results_dir: str | Path, study: Study) -> Path:
    return results_paths(results_dir, study)["study"] / FOLDER


def write_submission(
    study_file: str | Path, study: Study, trials: Sequence[Trial], uri: str, root: Path, **extra
) -> Path:
    """The submission's JSON (RESULTS/<study>/slurm/submission-<time>.json); `extra` (the
    launcher's options) is recorded with it."""
    record = {
        "study_file": str(Path(study_file).resolve()),
        "study": study.name,
        "results": str(Path(root).resolve()),
        "tracking_uri": uri,
        "submitted_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "trials": [{"trial_id": t.id, "arm": t.arm, "spec": t.spec.as_dict()} for t in trials],
        **extra,
    }
    folder = slurm_folder(root, study)
    path = folder / f"submission-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.json"
    durable.write_atomic(path, json.dumps(record, indent=1, sort_keys=True, default=str))
    return path


def read_submission(path: str | Path) -> dict[str, Any]:
    """A submission's record; a damaged one is a `StoreError` naming it."""
    fix = "move it aside and submit the study again (ablate run --launcher slurm)"
    record = durable.read_json(path, fix)
    if not isinstance(record, dict):
        raise StudyError(f"no submission {path}: submit the study again") from None
    return record


def record_job(path: Path, job_id: str, tasks: dict[str, str]) -> None:
    """Add the array's job id and trial id -> array task id to the submission's JSON."""
    record = read_submission(path)
    record.update(job_id=job_id, tasks=tasks)
    durable.write_atomic(path, json.dumps(record, indent=1, sort_keys=True, default=str))


def latest_submission(results_dir: str | Path, study: Study) -> dict[str, Any] | None:
    found = sorted(slurm_folder(results_dir, study).glob("submission-*.json"))
    return read_submission(found[-1]) if found else None


def train_one(submission: str, trial_id: str) -> dict[str, Any]:
    """The body of one array task: train trial `trial_id` of `submission` (a JSON path);
    returns its `TrialOutcome` as a dict. A trial another runner holds is waited for up to
    `LEASE_WAIT_S` (a dead holder's lease expires), then left to it."""

    record = read_submission(submission)
    study = load_study(record["study_file"])
    trial = _find_trial(study, trial_id, record["study_file"], record["results"])
    apply_threads(requested=int(record.get("cpus_per_task", 1)))
    uri, study_dir = record["tracking_uri"], results_paths(record["results"], study)["study"]
    deadline = time.monotonic() + LEASE_WAIT_S
    with _sigterm_stops_the_trial():
        while True:
            out = runner.run_trial(study, trial, uri, study_dir, RunHooks(), 0, 1)
            held = out.outcome == "skipped" and out.message.startswith(LEASED_ELSEWHERE)
            if not held or _alive_here(out.message) or time.monotonic() > deadline:
                break
            time.sleep(5)
    _close_parent_when_all_finished(study, uri, record["results"])
    return dataclasses.asdict(out)


def _alive_here(skipped: str) -> bool:
    """Whether the holder named in a skipped trial's message ("... (host:pid:nonce)") is a live
    process of this machine: it will finish the trial, there is nothing to wait for."""

    holder = skipped.rpartition("(")[2].rstrip(")")
    host = holder.partition(":")[0]
    return host == socket.gethostname() and not owner_is_dead(holder)


def _find_trial(study: Study, trial_id: str, study_file: str, results: str) -> Trial:
    """The trial as submitted: a tuned arm's at its chosen setting (the submitting runner
    tuned before it submitted)."""
    for trial in identified_trials(study, chosen=chosen_settings(study, results)):
        if trial.id == trial_id:
            return trial
    raise StudyError(
        f"trial {trial_id} is not a trial of {study_file} any more (was the file or a base "
        "model changed after submission?): submit the study again"
    )


@contextlib.contextmanager
def _sigterm_stops_the_trial() -> Iterator[None]:
    """Slurm ends a task (scancel, requeue, time limit) with SIGTERM, then SIGKILL: on SIGTERM
    the trial stops as after Ctrl-C (its run KILLED, its lease released), and a later task
    resumes it from its checkpoint. submitit's own handler only logs SIGTERM."""

    def stop(signum, frame) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the close must not be broken off
        raise Interrupted(signum)

    before = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    except Interrupted as exc:
        os._exit(128 + exc.signum)
    finally:
        signal.signal(signal.SIGTERM, before)


def _close_parent_when_all_finished(study: Study, uri: str, results: str) -> None:
    """The last task out marks the study's parent run FINISHED (a detached submission has no
    waiting process to do it)."""

    parent = tracking.open_store(uri).find_study(study.name)
    if parent is None:
        return
    statuses = parent.trial_status()
    trials = identified_trials(study, chosen=chosen_settings(study, results))
    if all(statuses.get(t.id) == "FINISHED" for t in trials):
        parent.close("FINISHED")


@dataclasses.dataclass(frozen=True)
class TrialState:
    """Where one trial is, read from the results store (and the lease table)."""

    trial: Trial
    state: str  # FINISHED | FAILED | RUNNING | KILLED | not started
    outcome: str = ""
    message: str = ""
    resumes: int = 0
    holder: str = ""

    @property
    def ended(self) -> bool:
        return self.state in ("FINISHED", "FAILED")


def trial_states(
    study: Study, trials: Sequence[Trial], uri: str, root: str | Path
) -> list[TrialState]:
    """Each trial's state from the store: its latest run (FINISHED wins), and who leases it."""

    store = tracking.open_store(uri)
    if not store.exists():  # never run: nothing to read, and reading must not create it
        return [TrialState(trial, "not started") for trial in trials]
    latest: dict[str, Any] = {}
    for _, row in store.runs(study.name).runs.iterrows():
        if latest.get(row["trial_id"], {}).get("status") != "FINISHED":
            latest[row["trial_id"]] = row
    leases = tracking.leases_of(store, Path(root).resolve())
    out = []
    for trial in trials:
        row = latest.get(trial.id)
        held = leases.holder(f"{study.name}/{trial.id}")
        if row is None:
            out.append(TrialState(trial, "not started", holder=held[0] if held else ""))
            continue
        out.append(
            TrialState(
                trial,
                str(row["status"]),
                _text(row["outcome"]),
                _text(row["outcome_message"]),
                int(row["resumes"] or 0),
                held[0] if held else "",
            )
        )
    return out


def _text(value: Any) -> str:
    """A table cell as text: a missing tag (None or pandas' NaN) is ""."""
    return "" if value is None or value != value else str(value)


def outcome_of(state: TrialState, why_unfinished: str) -> TrialOutcome:
    """The `TrialOutcome` a trial's state in the store amounts to after its array task ended."""
    s = state.trial.spec
    if state.state == "FINISHED":
        result = state.outcome if state.outcome in ("diverged",) else "finished"
        return TrialOutcome(state.trial.id, state.trial.arm, s.model, s.template, s.seed, result)
    message = state.message or why_unfinished
    args = (state.trial.id, state.trial.arm, s.model, s.template, s.seed)
    return TrialOutcome(*args, "failed", message)
