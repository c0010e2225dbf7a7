"""Run a study: preflight, the Pass@G phase (cached), then every trial not yet FINISHED: in this
process, in N (`ablate.study.pool`), or elsewhere (a launcher). Resume is free: finished trials
are skipped, killed ones continue from their last checkpoint in the same run of the results
store, logging each (metric, step) exactly once (`ablate.study.trial_run`); a failed trial is
recorded with its reason and the rest go on; any number of runners may share one results folder
or store (trial leases). The store is reached through the tracking port (`ablate.tracking`),
chosen by its URI.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from ablate import tracking
from ablate.base.errors import StoreError
from ablate.base.locks import file_lock
from ablate.study.identity import identified_trials
from ablate.study.pool import run_parallel
from ablate.study.preflight import preflight_study
from ablate.study.store_failures import store_errors
from ablate.study.study import Study, Trial
from ablate.study.trial_run import (
    LEASED_ELSEWHERE,
    RunHooks,
    TrialOutcome,
    notify,
    run_trial,
    study_tags,
    trial_outcome,
)
from ablate.study.tune_phase import tune_arms
from ablate.study.tuning import retuned

__all__ = [
    "LEASED_ELSEWHERE",
    "Launcher",
    "RunHooks",
    "TrialOutcome",
    "results_paths",
    "run_study",
    "run_trial",
    "setup_lock",
]

#: Runs the trials not yet FINISHED somewhere else (trials, store URI, results root, hooks) and
#: returns their outcomes, or None when it only submitted them (`ablate.study.slurm`).
Launcher = Callable[[list[Trial], str, Path, RunHooks], "list[TrialOutcome] | None"]


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
    tune_only: bool = False,
) -> list[TrialOutcome]:
    """Preflight, Pass@G phase, then the trials; returns one outcome per trial of the study.
    Any number of runners (and workers) may share the results folder: each trial is trained
    by one of them (`ablate.study.lease`), the others skip it. `select` (a sequential design's look)
    runs only the trials it accepts; the plan stays the whole study, and ids do not change.
    `launch` runs the trials elsewhere instead (`ablate.study.slurm`; None back: detached).
    `tune_only`: stop after the tuning phase (`ablate worker` and Slurm tasks read its
    `tuning.csv`); no trials, no outcomes."""
    from ablate.study.passk_phase import base_phases

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
        parent.set_tags({**study_tags(study), **tracking.environment_tags()})
        if study.passk is not None and not tune_only:
            base_phases(study, paths, parent, hooks)
        if study.tune is not None:  # the trials train at each arm's chosen setting
            trials = retuned(trials, tune_arms(study, trials, paths["root"], uri, hooks))
        if tune_only:
            return []
        parent.mark_plan({t.id for t in trials})  # views and summaries: this plan's runs only
        notify(hooks.on_phase, "trials")
        statuses = parent.trial_status()
        chosen = [t for t in trials if select is None or select(t)]
        todo = [t for t in chosen if statuses.get(t.id) != "FINISHED"]
        skipped = [trial_outcome(t, "skipped", "already FINISHED") for t in chosen if t not in todo]
        notify(hooks.on_plan, todo, len(skipped))
        done = _train(study, todo, uri, paths, workers, hooks, launch)
        if done is None:  # submitted and detached: the last array task closes the parent
            return skipped
        if study.eval.robustness is not None:  # the final checkpoints under every eval recipe
            from ablate.study.recipe_phase import evaluate_recipes

            evaluate_recipes(study, trials, paths["study"], uri, hooks)
        _close_parent(parent, done)
    return skipped + done


def _train(study, todo, uri, paths, workers, hooks, launch) -> list[TrialOutcome] | None:
    """`todo`'s outcomes: by the launcher (None: submitted, detached), here, or in workers."""
    if launch is not None:
        return launch(todo, uri, paths["root"], hooks)
    if workers <= 1:
        n = len(todo)
        return [run_trial(study, t, uri, paths["study"], hooks, i, n) for i, t in enumerate(todo)]
    return run_parallel(study, todo, uri, paths["study"], workers, hooks)


def _close_parent(parent, outcomes: list[TrialOutcome]) -> None:
    """FINISHED, unless a trial this runner skipped is still being trained by another runner:
    that runner closes it when it is done."""
    elsewhere = {o.trial_id for o in outcomes if o.message.startswith(LEASED_ELSEWHERE)}
    statuses = parent.trial_status() if elsewhere else {}
    if all(statuses.get(trial_id) == "FINISHED" for trial_id in elsewhere):
        parent.close("FINISHED")


@contextlib.contextmanager
def setup_lock(root: Path) -> Iterator[None]:
    """Exclusive among the processes of this machine sharing the results folder `root`."""

    lock = Path(root) / ".setup.lock"
    with file_lock(lock, f"the results folder's setup lock {lock} (another runner sets up)"):
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
