"""Run a study: preflight, the Pass@G phase (cached), then every trial not yet FINISHED, locally
in one or N processes. Resume is free: finished trials are skipped, killed ones continue from
their last checkpoint in the same run of the results store, logging each (metric, step) exactly
once; a failed trial is recorded with its reason and the rest go on; any number of runners may
share one results folder or store (trial leases). The store is reached through the tracking port
(`ablate.tracking`), chosen by its URI.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ablate.base.errors import StoreError
from ablate.base.store import tags as tag
from ablate.study.store_failures import store_error, store_errors
from ablate.study.study import Study, Trial

TrialStart = Callable[[Trial, int, int], None]
#: How a trial skipped because another runner holds its lease is described.
LEASED_ELSEWHERE = "being trained by another runner"
StepHook = Callable[[int, int, dict[str, float]], None]
#: A trial running in a worker process reached a step (0: it started there).
TrialStep = Callable[[Trial, int, int, dict[str, float]], None]
#: Runs the trials not yet FINISHED somewhere else (trials, store URI, results root, hooks) and
#: returns their outcomes, or None when it only submitted them (`ablate.launch.slurm`).
Launcher = Callable[[list[Trial], str, Path, "RunHooks"], "list[TrialOutcome] | None"]
#: The metrics a worker relays with each step: what a progress line or bar shows.
PROGRESS_KEYS = ("reward/mean", "eval/pass_at_1", "budget/generated_tokens", "budget/wall_seconds")


@dataclass
class TrialOutcome:
    trial_id: str
    arm: str
    model: str
    template: str
    seed: int
    outcome: str  # finished | diverged | failed | skipped
    message: str = ""
    final_eval: dict[str, float] | None = None


@dataclass
class RunHooks:
    """Callbacks for progress display (the CLI supplies rich bars)."""

    on_phase: Callable[[str], None] | None = None
    on_trial_start: TrialStart | None = None
    on_step: StepHook | None = None
    on_trial_end: Callable[[TrialOutcome], None] | None = None
    on_passk: Callable[[str, int, int], None] | None = None
    #: with workers > 1, instead of on_trial_start / on_step: trials interleave
    on_trial_step: TrialStep | None = None
    #: before the trials: those this run will train, and how many chosen ones had FINISHED
    on_plan: Callable[[list[Trial], int], None] | None = None


def results_paths(results_dir: str | Path, study: Study) -> dict[str, Path]:
    root = Path(results_dir).resolve()
    return {"root": root, "study": root / study.name, "passk": root / "passk-cache"}


def run_study(
    study: Study,
    *,
    results_dir: str | Path = "results",
    workers: int = 1,
    tracking_uri: str | None = None,
    hooks: RunHooks | None = None,
    select: Callable[[Trial], bool] | None = None,
    launch: Launcher | None = None,
) -> list[TrialOutcome]:
    """Preflight, Pass@G phase, then the trials; returns one outcome per trial of the study.
    Any number of runners (and workers) may share the results folder: each trial is trained
    by one of them (`ablate.study.lease`), the others skip it. `select` (a sequential design's look)
    runs only the trials it accepts; the plan stays the whole study, and ids do not change.
    `launch` runs the trials elsewhere instead (`ablate.launch.slurm`; None back: detached)."""
    from ablate import tracking
    from ablate.study.passk_phase import base_phases
    from ablate.study.preflight import preflight_study

    hooks = hooks or RunHooks()
    paths = results_paths(results_dir, study)
    uri = tracking_uri or tracking.default_uri(paths["root"])
    store = tracking.open_store(uri)
    preflight_study(study, paths["root"], uri)  # every input checked before anything is written
    trials = identified_trials(study)
    with store_errors(store), setup_lock(paths["root"]):  # one setup and parent, whoever races
        store.init()
        parent = store.open_study(study.name)
    with store_errors(store), _parent_closed_on_error(parent):
        parent.set_tags({tag.REFERENCE_ARM: study.reference_arm, **tracking.environment_tags()})
        parent.mark_plan({t.id for t in trials})  # views and summaries: this plan's runs only
        if study.passk is not None:
            base_phases(study, paths, parent, hooks)
        _notify(hooks.on_phase, "trials")
        statuses = parent.trial_status()
        chosen = [t for t in trials if select is None or select(t)]
        todo = [t for t in chosen if statuses.get(t.id) != "FINISHED"]
        skipped = [_outcome(t, "skipped", "already FINISHED") for t in chosen if t not in todo]
        _notify(hooks.on_plan, todo, len(skipped))
        if launch is not None:
            done = launch(todo, uri, paths["root"], hooks)
        elif workers <= 1:
            done = [
                run_trial(study, t, uri, paths["study"], hooks, i, len(todo))
                for i, t in enumerate(todo)
            ]
        else:
            done = _run_parallel(study, todo, uri, paths["study"], workers, hooks)
        if done is None:  # submitted and detached: the last array task closes the parent
            return skipped
        _close_parent(parent, done)
    return skipped + done


def _close_parent(parent, outcomes: list[TrialOutcome]) -> None:
    """FINISHED, unless a trial this runner skipped is still being trained by another runner:
    that runner closes it when it is done."""
    elsewhere = {o.trial_id for o in outcomes if o.message.startswith(LEASED_ELSEWHERE)}
    statuses = parent.trial_status() if elsewhere else {}
    if all(statuses.get(trial_id) == "FINISHED" for trial_id in elsewhere):
        parent.close("FINISHED")


def identified_trials(study: Study) -> list[Trial]:
    """The study's trials with each base model's weights hash in their spec (and so in their
    id): a model rebuilt under the same name is a different trial, never a resumed one."""
    from ablate.models import weights_hash

    trials = study.trials()
    hashes = {m: weights_hash(m) for m in dict.fromkeys(t.spec.model for t in trials)}
    return [
        Trial(t.arm, dataclasses.replace(t.spec, model_weights=hashes[t.spec.model]))
        for t in trials
    ]


@contextlib.contextmanager
def setup_lock(root: Path) -> Iterator[None]:
    """Exclusive among the processes of this machine sharing the results folder `root`."""
    from ablate.base.locks import file_lock

    with file_lock(Path(root) / ".setup.lock"):
        yield


@contextlib.contextmanager
def _parent_closed_on_error(parent) -> Iterator[None]:
    """A study that stops early never leaves its parent run RUNNING (if the store can say so:
    after a store failure it is not asked, which would cost a tracking server's whole retry
    budget again before the one line)."""
    try:
        yield
    except StoreError:
        raise
    except BaseException as exc:
        status = "KILLED" if isinstance(exc, KeyboardInterrupt) else "FAILED"
        with contextlib.suppress(Exception):
            parent.close(status)
        raise


def _notify(hook, *args) -> None:
    if hook is not None:
        hook(*args)


def _outcome(trial: Trial, outcome: str, message: str = "", final=None) -> TrialOutcome:
    s = trial.spec
    return TrialOutcome(trial.id, trial.arm, s.model, s.template, s.seed, outcome, message, final)


def trial_tags(study: Study, trial: Trial) -> dict[str, str]:
    from ablate import tracking

    s = trial.spec
    reference = study.arm(study.reference_arm).algorithm
    return {
        tag.ARM: trial.arm,
        tag.TRIAL_ID: trial.id,
        tag.CURRENT: "true",
        tag.SEED: str(s.seed),
        tag.MODEL: s.model,
        tag.MODEL_WEIGHTS: s.model_weights,
        tag.TEMPLATE: s.template,
        tag.TASK: s.task,
        tag.BUDGET: json.dumps(s.budget.__dict__, sort_keys=True),
        **tracking.algorithm_diff_tags(s.algorithm, reference),
        **tracking.environment_tags(),
    }


def run_trial(
    study: Study, trial: Trial, uri: str, study_dir: Path, hooks: RunHooks, index: int, total: int
) -> TrialOutcome:
    """Train one trial into its run of the store at `uri`, under the trial's lease. A trial
    another runner holds is skipped; a failure of the trial is recorded, never raised; a results
    store that cannot be written stops the study (`StoreError`), leaving the trial to resume."""
    from ablate import tracking
    from ablate.study.lease import LeaseStore, TrialLease

    store = tracking.open_store(uri)
    lease_url = store.lease_url(Path(study_dir).parent)
    with store_errors(store, trial, where=lease_url):
        leases = LeaseStore(lease_url)
        lease = TrialLease(leases, f"{study.name}/{trial.id}")
        holder = lease.acquire()
    if holder is not None:
        out = _outcome(trial, "skipped", f"{LEASED_ELSEWHERE} ({holder})")
    else:
        try:
            out = _run_leased(study, trial, store, study_dir, hooks, (index, total), lease)
        finally:
            lease.release()
    _notify(hooks.on_trial_end, out)
    return out


def _run_leased(study, trial, store, study_dir, hooks, position, lease) -> TrialOutcome:
    from ablate.study.lease import LeaseLost
    from ablate.trial import train

    _notify(hooks.on_trial_start, trial, *position)
    s = trial.spec
    try:
        parent = store.open_study(study.name)
        if parent.trial_status().get(trial.id) == "FINISHED":  # by another runner, just now
            return _outcome(trial, "skipped", "already FINISHED")
        run_name = f"{trial.arm} | {s.model} | {s.template} | seed {s.seed}"
        tags = trial_tags(study, trial)
        tracker = parent.trial_tracker(trial.id, run_name=run_name, tags=tags, guard=lease.check)
        tracker.log_dict(trial.spec.as_dict(), "config.json")
    except Exception as exc:
        if store.is_failure(exc):
            raise store_error(exc, trial, store.uri) from exc
        raise

    def on_step(step: int, total: int, metrics: dict[str, float]) -> None:
        lease.check()  # stop before writing a checkpoint another runner may now own
        _notify(hooks.on_step, step, total, metrics)

    run_dir = Path(study_dir) / "trials" / trial.id
    try:
        result = train(s, tracker=tracker, run_dir=run_dir, progress=on_step)
        # a diverged trial is a result (deterministic: rerunning would diverge again)
        tracker.close("FAILED" if result.outcome == "failed" else "FINISHED")
    except LeaseLost as exc:
        return _outcome(trial, "skipped", str(exc))
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM, a worker's coordinator gone: stopped, not failed
        with contextlib.suppress(Exception):
            tracker.close("KILLED")  # a rerun resumes this run from its last checkpoint
        raise
    except Exception as exc:
        if store.is_failure(exc):
            raise store_error(exc, trial, store.uri) from exc
        message = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        _close_failed(tracker, message)
        out = _outcome(trial, "failed", message)
    else:
        out = _outcome(trial, result.outcome, result.message, result.final_eval)
    return out


def _close_failed(tracker, message: str) -> None:
    """Record a crashed trial; if the tracking store itself is what failed, say so and go on."""
    import warnings

    try:
        tracker.set_tags({tag.OUTCOME: "failed", tag.OUTCOME_MESSAGE: message[:4000]})
        tracker.close("FAILED")
    except Exception as exc:  # the store is down too: the run stays RUNNING, a rerun resumes it
        warnings.warn(f"could not record the failed trial in the store: {exc}", stacklevel=2)


#: a worker process's end of the progress queue (set by `_worker_init`; None once the worker
#: stops: its coordinator may be gone, and a put would end in a BrokenPipeError traceback)
_PROGRESS: Any = None
#: whether the worker process is inside a trial (a stop there marks the trial's run KILLED)
_IN_TRIAL = False


def _worker_init(threads: int, progress: Any) -> None:
    import warnings

    import torch

    from ablate.base.errors import AblateWarning

    global _PROGRESS
    _PROGRESS = progress
    torch.set_num_threads(threads)
    # the coordinating process printed them when the study loaded; a worker would repeat
    # them once per trial, with a source location
    warnings.simplefilter("ignore", AblateWarning)
    _stop_with_coordinator()


def _stop_with_coordinator() -> None:
    """A worker stops when its coordinator stops it (the pool's SIGTERM; Ctrl-C reaches the
    coordinator, which stops the pool) or is gone (SIGKILL: the kernel's SIGTERM on Linux, the
    parent watch elsewhere): its trial's run marked KILLED, its lease released, no traceback."""
    import os
    import signal

    from ablate.base.errors import Interrupted
    from ablate.base.lifetime import die_with_parent, watch_parent

    def stop(signum, frame) -> None:
        global _PROGRESS
        _PROGRESS = None
        # once: the kernel's SIGTERM and the parent watch's both come, and a second one would
        # break off the closing of the trial's run that the first one started
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if _IN_TRIAL:
            raise Interrupted(signum)
        os._exit(128 + signum)  # between trials: nothing to close

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, stop)
    die_with_parent(signal.SIGTERM)
    watch_parent(lambda: os.kill(os.getpid(), signal.SIGTERM))


def _relay(event: tuple) -> None:
    if _PROGRESS is not None:
        _PROGRESS.put(event)


def _run_in_worker(args: tuple) -> TrialOutcome:
    import os

    global _IN_TRIAL
    study, trial, uri, study_dir = args

    def on_step(step: int, total: int, metrics: dict[str, float]) -> None:
        relayed = {k: float(metrics[k]) for k in PROGRESS_KEYS if k in metrics}
        _relay((trial.id, step, total, relayed))

    hooks = RunHooks(on_trial_start=lambda *_: _relay((trial.id, 0, 0, {})), on_step=on_step)
    _IN_TRIAL = True
    try:
        return run_trial(study, trial, uri, study_dir, hooks, 0, 1)
    except KeyboardInterrupt as exc:  # stopped: the run is KILLED and the lease released
        os._exit(128 + getattr(exc, "signum", 15))
    finally:
        _IN_TRIAL = False


def _relay_progress(queue: Any, trials: dict[str, Trial], hooks: RunHooks) -> None:
    """The coordinating process's side: each worker step to `hooks.on_trial_step`, until None.
    A display that fails stops the display, never the study."""
    while (event := queue.get()) is not None:
        trial_id, step, total, metrics = event
        with contextlib.suppress(Exception):
            _notify(hooks.on_trial_step, trials[trial_id], step, total, metrics)


def _run_parallel(study, todo, uri, study_dir, workers, hooks) -> list[TrialOutcome]:
    """N processes, each with the threads `ablate.base.threads` allots one of N workers; their
    trials' progress comes back through a queue to `hooks.on_trial_step`."""
    import multiprocessing as mp
    import threading

    from ablate.base.threads import choose_threads

    ctx = mp.get_context("spawn")
    outcomes = []
    progress = ctx.Queue()
    relay = threading.Thread(
        target=_relay_progress, args=(progress, {t.id: t for t in todo}, hooks), daemon=True
    )
    relay.start()
    initargs = (choose_threads(workers), progress)
    try:
        with ctx.Pool(workers, initializer=_worker_init, initargs=initargs) as pool:
            jobs = [(study, t, uri, study_dir) for t in todo]
            for out in pool.imap_unordered(_run_in_worker, jobs):
                outcomes.append(out)
                _notify(hooks.on_trial_end, out)
    finally:
        progress.put(None)
        relay.join(timeout=10)
    return outcomes
