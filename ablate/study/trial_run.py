"""One trial, trained under its lease into its run of the results store: the unit every way of
running a study shares (`ablate run` in one process or N, `ablate worker`, a Slurm array task).
A trial another runner holds is skipped; a killed one resumes from its last checkpoint in the
same run, logging each (metric, step) exactly once; a failure of the trial is recorded, never
raised; a results store that cannot be written stops the study (`StoreError`).
"""

from __future__ import annotations

import contextlib
import json
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ablate import tracking
from ablate.base.errors import StoreError
from ablate.base.store import tags as tag
from ablate.study.lease import LeaseLost, TrialLease
from ablate.study.store_failures import lease_errors, store_error
from ablate.study.study import Study, Trial

TrialStart = Callable[[Trial, int, int], None]
#: How a trial skipped because another runner holds its lease is described.
LEASED_ELSEWHERE = "being trained by another runner"
StepHook = Callable[[int, int, dict[str, float]], None]
#: A trial running in a worker process reached a step (0: it started there).
TrialStep = Callable[[Trial, int, int, dict[str, float]], None]


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


def notify(hook, *args) -> None:
    if hook is not None:
        hook(*args)


def trial_outcome(trial: Trial, outcome: str, message: str = "", final=None) -> TrialOutcome:
    s = trial.spec
    return TrialOutcome(trial.id, trial.arm, s.model, s.template, s.seed, outcome, message, final)


def study_tags(study: Study) -> dict[str, str]:
    """The study's parent run's own tags: its reference arm and its arms in declared order."""
    return {
        tag.REFERENCE_ARM: study.reference_arm,
        tag.ARMS: json.dumps([a.name for a in study.arms]),
    }


def trial_tags(study: Study, trial: Trial) -> dict[str, str]:

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
        tag.CELL: f"{trial.arm} | {s.model} | {s.template}",
        tag.TASK: s.task,
        tag.BUDGET: json.dumps(s.budget.__dict__, sort_keys=True),
        **tracking.algorithm_diff_tags(s.algorithm, reference),
        **tracking.environment_tags(),
    }


def run_trial(
    study: Study,
    trial: Trial,
    uri: str,
    study_dir: Path,
    hooks: RunHooks,
    index: int,
    total: int,
    *,
    experiment: str | None = None,
    tags: dict[str, str] | None = None,
) -> TrialOutcome:
    """Train one trial into its run of the store at `uri`, under the trial's lease. A trial
    another runner holds is skipped; a failure of the trial is recorded, never raised; a results
    store that cannot be written stops the study (`StoreError`), leaving the trial to resume.
    `experiment`: where the study's parent run lives, if not in its own name's (a study's
    tuning trials live in the study's); `tags`: added to the run's."""

    store = tracking.open_store(uri)
    leases = tracking.leases_of(store, Path(study_dir).parent)
    with lease_errors(leases, trial):
        lease = TrialLease(leases, f"{study.name}/{trial.id}")
        holder = lease.acquire()
    if holder is not None:
        out = trial_outcome(trial, "skipped", f"{LEASED_ELSEWHERE} ({holder})")
    else:
        try:
            where = (experiment, tags or {})
            out = _run_leased(study, trial, store, study_dir, hooks, (index, total), lease, where)
        finally:
            lease.release()
    notify(hooks.on_trial_end, out)
    return out


def _run_leased(study, trial, store, study_dir, hooks, position, lease, where) -> TrialOutcome:
    from ablate.trial import train

    notify(hooks.on_trial_start, trial, *position)
    s = trial.spec
    experiment, extra_tags = where
    try:
        parent = store.open_study(study.name, experiment=experiment)
        if parent.trial_status().get(trial.id) == "FINISHED":  # by another runner, just now
            return trial_outcome(trial, "skipped", "already FINISHED")
        run_name = f"{trial.arm} | {s.model} | {s.template} | seed {s.seed}"
        tags = {**trial_tags(study, trial), **extra_tags}
        tracker = parent.trial_tracker(trial.id, run_name=run_name, tags=tags, guard=lease.check)
        tracker.log_dict(trial.spec.as_dict(), "config.json")
    except Exception as exc:
        if tracking.is_failure(store, exc):
            raise store_error(exc, trial, store.uri) from exc
        raise  # a StoreError (a damaged store file, named) too

    def on_step(step: int, total: int, metrics: dict[str, float]) -> None:
        lease.check()  # stop before writing a checkpoint another runner may now own
        notify(hooks.on_step, step, total, metrics)

    run_dir = Path(study_dir) / "trials" / trial.id
    try:
        result = train(s, tracker=tracker, run_dir=run_dir, progress=on_step)
        # a diverged trial is a result (deterministic: rerunning would diverge again)
        tracker.close("FAILED" if result.outcome == "failed" else "FINISHED")
    except LeaseLost as exc:
        return trial_outcome(trial, "skipped", str(exc))
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM, a worker's coordinator gone: stopped, not failed
        with contextlib.suppress(Exception):
            tracker.close("KILLED")  # a rerun resumes this run from its last checkpoint
        raise
    except StoreError:  # the store's own words (a damaged file, named): not the trial's failure
        raise
    except Exception as exc:
        if tracking.is_failure(store, exc):
            raise store_error(exc, trial, store.uri) from exc
        message = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        _close_failed(tracker, message)
        out = trial_outcome(trial, "failed", message)
    else:
        out = trial_outcome(trial, result.outcome, result.message, result.final_eval)
    return out


def _close_failed(tracker, message: str) -> None:
    """Record a crashed trial; if the tracking store itself is what failed, say so and go on."""

    try:
        tracker.set_tags({tag.OUTCOME: "failed", tag.OUTCOME_MESSAGE: message[:4000]})
        tracker.close("FAILED")
    except Exception as exc:  # the store is down too: the run stays RUNNING, a rerun resumes it
        warnings.warn(f"could not record the failed trial in the store: {exc}", stacklevel=2)
