"""`ablate run --workers N`: the study's trials in N processes on this machine. Each worker
trains whole trials (`ablate.study.trial_run.run_trial`, under their leases, as one process
would); their progress comes back through a queue to the coordinating process's hooks. Workers
ignore Ctrl-C (the coordinator stops the pool) and stop when their coordinator is gone, even by
SIGKILL, their trials' runs marked KILLED.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

from ablate.base.errors import AblateWarning, Interrupted
from ablate.base.lifetime import die_with_parent, watch_parent
from ablate.base.threads import choose_threads
from ablate.base.waits import WaitWarning
from ablate.study.study import Study, Trial
from ablate.study.trial_run import RunHooks, TrialOutcome, notify, run_trial

#: The metrics a worker relays with each step: what a progress line or bar shows.
PROGRESS_KEYS = ("reward/mean", "eval/pass_at_1", "budget/generated_tokens", "budget/wall_seconds")

#: a worker process's end of the progress queue (set by `_worker_init`; None once the worker
#: stops: its coordinator may be gone, and a put would end in a BrokenPipeError traceback)
_PROGRESS: Any = None
#: whether the worker process is inside a trial (a stop there marks the trial's run KILLED)
_IN_TRIAL = False


def _worker_init(threads: int, progress: Any) -> None:

    import torch

    global _PROGRESS
    _PROGRESS = progress
    torch.set_num_threads(threads)
    # the coordinating process printed them when the study loaded; a worker would repeat
    # them once per trial, with a source location; a wait that lasts is the worker's own news
    warnings.simplefilter("ignore", AblateWarning)
    warnings.simplefilter("always", WaitWarning)
    warnings.showwarning = _one_line
    _stop_with_coordinator()


def _one_line(message, category, filename, lineno, file=None, line=None) -> None:
    """A worker's warning as the CLI prints one: `warning: <message>`, no source location."""
    with contextlib.suppress(OSError, ValueError):  # the coordinator's stderr may be gone
        sys.stderr.write(f"warning: {message}\n")


def _stop_with_coordinator() -> None:
    """A worker stops when its coordinator stops it (the pool's SIGTERM; Ctrl-C reaches the
    coordinator, which stops the pool) or is gone (SIGKILL: the kernel's SIGTERM on Linux, the
    parent watch elsewhere): its trial's run marked KILLED, its lease released, no traceback."""

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
            notify(hooks.on_trial_step, trials[trial_id], step, total, metrics)


def run_parallel(
    study: Study, todo: list[Trial], uri: str, study_dir: Path, workers: int, hooks: RunHooks
) -> list[TrialOutcome]:
    """N processes, each with the threads `ablate.base.threads` allots one of N workers; their
    trials' progress comes back through a queue to `hooks.on_trial_step`."""

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
                notify(hooks.on_trial_end, out)
            # every trial done: the workers read the end of the task queue and exit on their
            # own. The pool's exit would SIGTERM them, and a worker idle on the queue's lock
            # whose signal lands on one of its other threads never runs its handler: the
            # coordinator then waits on it for ever (seen once: the fast suite under
            # pytest-xdist on 2 busy cores, `ablate run --workers 2` hung in Pool.terminate).
            pool.close()
            pool.join()
    finally:
        progress.put(None)
        relay.join(timeout=10)
    return outcomes
