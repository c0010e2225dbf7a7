"""Workers on many machines: every worker pulls trials of one study from an Optuna RDB storage
(PostgreSQL) and logs them to one shared results store (MLflow on PostgreSQL or a server).

Each ablate trial is one enqueued Optuna trial (WAITING, user attr `ablate_trial_id`). A worker
claims a WAITING trial with the storage's row-locked WAITING -> RUNNING transition, so two
workers never take the same one; it never asks Optuna for a new trial, so the sampler never
invents one, and it exits when no WAITING trial is left. While a trial runs a thread records its
heartbeat; a trial whose worker died goes stale after `grace_period` and is failed and re-enqueued
(up to `max_retry` times) by the next worker that looks for work, which resumes its run.

Setting up (storage tables, Optuna study, results store and parent run, enqueueing) happens under
one lock per study (a PostgreSQL advisory lock; a file lock for a one-machine sqlite storage):
the workers that arrive together do it one after another, so tables are created, the parent run
is opened and each trial is enqueued exactly once.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ablate import tracking
from ablate.base.errors import ConfigError
from ablate.base.locks import file_lock
from ablate.base.sql_urls import driver_url
from ablate.study import trial_run
from ablate.study.identity import identified_trials
from ablate.study.preflight import preflight_study
from ablate.study.runner import results_paths
from ablate.study.study import Study, Trial
from ablate.study.trial_run import RunHooks, TrialOutcome, study_tags
from ablate.study.tune_phase import chosen_settings

if TYPE_CHECKING:
    import optuna

TRIAL_ATTR = "ablate_trial_id"
OUTCOME_ATTR = "ablate_outcome"
METRIC = "eval/pass_at_1"  # the Optuna value of a trial, for a glance at the storage


@dataclass(frozen=True, kw_only=True)
class WorkerConfig:
    storage: str
    """Optuna storage URL: postgresql://… across machines, sqlite:///… on one machine."""
    tracking_uri: str
    """Results store shared by all workers (MLflow on PostgreSQL or a tracking server)."""
    results_dir: Path
    """Where this worker keeps trial checkpoints (local to the machine)."""
    heartbeat_interval: int = 60
    grace_period: int = 180
    """A RUNNING trial without a heartbeat for this long is failed and retried."""
    max_retry: int = 2

    def __post_init__(self) -> None:
        object.__setattr__(self, "storage", driver_url(self.storage))
        object.__setattr__(self, "tracking_uri", driver_url(self.tracking_uri))
        object.__setattr__(self, "results_dir", Path(self.results_dir))


def run_worker(
    study: Study, config: WorkerConfig, hooks: RunHooks | None = None
) -> list[TrialOutcome]:
    """Set up (once per study, whoever comes first), then run WAITING trials until none is
    left; returns the outcomes of the trials this worker ran or skipped."""

    hooks = hooks or RunHooks()
    # every input checked before anything is written
    preflight_study(study, config.results_dir, config.tracking_uri)
    # a tuned study's trials at each arm's chosen setting (`ablate run --tune-only` tunes)
    identified = identified_trials(study, chosen=chosen_settings(study, config.results_dir))
    queue = prepare(study, config, identified)
    trials = {t.id: t for t in identified}
    # One handle for the status checks: opening a store's client can cost ~0.6 s.
    parent = tracking.open_store(config.tracking_uri).open_study(study.name)
    outcomes: list[TrialOutcome] = []
    while (claimed := claim_waiting(queue)) is not None:
        with Heartbeat(queue, queue.storage_id(claimed), config.heartbeat_interval):
            outcome = _run_claimed(study, trials, claimed, parent, config, hooks, len(outcomes))
        _tell(queue, claimed, outcome)
        outcomes.append(outcome)
    _close_parent_if_done(queue.study, parent)
    return outcomes


@dataclass(frozen=True)
class TrialQueue:
    """The Optuna study that queues an ablate study's trials, with the storage it lives in
    (kept here, so nothing reads Optuna's private attributes)."""

    study: optuna.Study
    storage: optuna.storages.RDBStorage

    def storage_id(self, trial: optuna.trial.FrozenTrial) -> int:
        """The storage's id of `trial` (what heartbeats and state changes address)."""
        study_id = self.storage.get_study_id_from_name(self.study.study_name)
        return self.storage.get_trial_id_from_study_id_trial_number(study_id, trial.number)


def prepare(study: Study, config: WorkerConfig, trials: list[Trial] | None = None) -> TrialQueue:
    """Under the study's lock: storage tables, the Optuna study, the results store and parent
    run, and one WAITING trial per ablate trial not enqueued before (by anyone)."""
    import optuna

    with study_lock(config.storage, study.name), warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        storage = optuna.storages.RDBStorage(
            config.storage,
            heartbeat_interval=config.heartbeat_interval,
            grace_period=config.grace_period,
            heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(
                max_retry=config.max_retry
            ),
        )
        optuna_study = optuna.create_study(
            storage=storage, study_name=study.name, direction="maximize", load_if_exists=True
        )
        store = tracking.open_store(config.tracking_uri)
        store.init()
        parent = store.open_study(study.name)
        if parent.run_id not in _parent_ids(optuna_study):  # first worker: tag the new parent
            parent.set_tags({**study_tags(study), **tracking.environment_tags()})
            optuna_study.set_user_attr("ablate_parent_run_id", parent.run_id)
        if trials is None:
            trials = identified_trials(study, chosen=chosen_settings(study, config.results_dir))
        enqueue_missing(optuna_study, trials)
    return TrialQueue(optuna_study, storage)


def _parent_ids(optuna_study: optuna.Study) -> set[str]:
    run_id = optuna_study.user_attrs.get("ablate_parent_run_id")
    return {run_id} if run_id else set()


def enqueue_missing(optuna_study: optuna.Study, trials: list[Trial]) -> int:
    """Enqueue every trial no Optuna trial refers to yet; returns how many. Callers hold the
    study lock: `skip_if_exists` alone races between processes."""
    known = {t.user_attrs.get(TRIAL_ATTR) for t in optuna_study.get_trials(deepcopy=False)}
    new = [(i, t) for i, t in enumerate(trials) if t.id not in known]
    for index, trial in new:
        optuna_study.enqueue_trial(
            {"trial_index": index},
            user_attrs={
                TRIAL_ATTR: trial.id,
                "ablate_arm": trial.arm,
                "ablate_seed": trial.spec.seed,
            },
            skip_if_exists=True,
        )
    return len(new)


@contextlib.contextmanager
def study_lock(storage_url: str, study_name: str) -> Iterator[None]:
    """Exclusive across every worker of `study_name` that shares `storage_url`."""
    if storage_url.startswith("postgresql+psycopg2://"):
        with _advisory_lock(storage_url, study_name):
            yield
    elif storage_url.startswith("sqlite:///"):
        with file_lock(Path(storage_url[len("sqlite:///") :]).with_suffix(".lock")):
            yield
    else:
        raise ConfigError(
            f"storage {storage_url!r}: use postgresql://user:pw@host/db (many machines) or "
            "sqlite:///path.db (one machine)"
        )


@contextlib.contextmanager
def _advisory_lock(url: str, name: str) -> Iterator[None]:
    import sqlalchemy

    # A session-level lock: PostgreSQL releases it by itself if this worker dies holding it.
    key = int.from_bytes(hashlib.sha256(f"ablate:{name}".encode()).digest()[:8], "big", signed=True)
    engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)
    try:
        with engine.connect() as conn:
            conn.execute(sqlalchemy.text("SELECT pg_advisory_lock(:k)"), {"k": key})
            conn.commit()  # do not sit "idle in transaction" while holding the lock
            try:
                yield
            finally:
                conn.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:k)"), {"k": key})
                conn.commit()
    finally:
        engine.dispose()


def claim_waiting(queue: TrialQueue) -> optuna.trial.FrozenTrial | None:
    """Fail (and so re-enqueue) stale trials, then take one WAITING trial, or None when none is
    left. `study.ask()` is not used: with nothing WAITING it would create a new trial."""
    import optuna
    from optuna.trial import TrialState

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(queue.study)
    waiting = queue.study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
    for trial in waiting:
        try:
            # Row-locked in the storage: only one worker moves a trial from WAITING to RUNNING.
            running = TrialState.RUNNING
            if queue.storage.set_trial_state_values(queue.storage_id(trial), state=running):
                return trial
        except optuna.exceptions.UpdateFinishedTrialError:
            continue
    return None


class Heartbeat:
    """Records a trial's heartbeat every `interval` seconds in a thread, from entry to exit."""

    def __init__(self, queue: TrialQueue, trial_id: int, interval: int) -> None:
        self._storage, self._trial_id, self._interval = queue.storage, trial_id, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)

    def _beat(self) -> None:
        while not self._stop.wait(self._interval):
            # A database hiccup must not end the beating: a silent trial is retried elsewhere
            # while it still runs here.
            with contextlib.suppress(Exception):
                self._storage.record_heartbeat(self._trial_id)

    def __enter__(self) -> Heartbeat:
        self._storage.record_heartbeat(self._trial_id)  # stale-detectable from the first moment
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()


def _run_claimed(study, trials, claimed, parent, config, hooks, index) -> TrialOutcome:

    trial_id = claimed.user_attrs.get(TRIAL_ATTR)
    trial = trials.get(trial_id)
    if trial is None:
        message = "not a trial of this study file: do all workers load the same study?"
        return TrialOutcome(str(trial_id), "?", "?", "?", -1, "failed", message)
    s = trial.spec
    # Another worker (or `ablate run`) may have finished it since it was enqueued.
    if parent.trial_status().get(trial.id) == "FINISHED":
        message = "already FINISHED in the results store"
        return TrialOutcome(trial.id, trial.arm, s.model, s.template, s.seed, "skipped", message)
    study_dir = results_paths(config.results_dir, study)["study"]
    uri = config.tracking_uri
    return trial_run.run_trial(study, trial, uri, study_dir, hooks, index, len(trials))


def _tell(queue: TrialQueue, claimed, outcome: TrialOutcome) -> None:
    import optuna
    from optuna.trial import TrialState

    optuna_study = queue.study
    try:
        trial_id = queue.storage_id(claimed)
        queue.storage.set_trial_user_attr(trial_id, OUTCOME_ATTR, outcome.outcome)
    except optuna.exceptions.UpdateFinishedTrialError:
        # Failed as stale while it ran (a missed heartbeat): its retry finds the trial's run
        # FINISHED and skips it, so nothing is lost and nothing runs twice to completion.
        return
    value = (outcome.final_eval or {}).get(METRIC)
    done = outcome.outcome in ("finished", "skipped")
    if done and value is not None:
        optuna_study.tell(claimed.number, value, skip_if_finished=True)
    else:  # a skipped trial is no new result; a failed or diverged one has no value
        state = TrialState.PRUNED if done else TrialState.FAIL
        optuna_study.tell(claimed.number, state=state, skip_if_finished=True)


def _close_parent_if_done(optuna_study: optuna.Study, parent) -> None:
    """The last worker out marks the study's parent run FINISHED (idempotent)."""
    from optuna.trial import TrialState

    busy = optuna_study.get_trials(deepcopy=False, states=(TrialState.WAITING, TrialState.RUNNING))
    if not busy:
        parent.close("FINISHED")
