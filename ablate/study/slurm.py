"""Studies as Slurm job arrays through submitit: the only module that imports submitit.

`ablate run --launcher slurm` does the study's setup as a local run does (preflight, the results
store and parent run, the Pass@G phase), then submits the trials not yet FINISHED as one job
array, one task per trial, each calling `run_array_task(submission JSON path, trial id)`: a
module-level function with plain string arguments (what submitit pickles is a reference to it
and two strings). Then it waits, showing every trial's state from the results store, or returns
at once (`detach`). Exactly once comes from the trials' leases and resume-from-checkpoint, not
from Slurm: a cancelled, killed, timed-out or requeued task's trial is resumed by the next task
that gets it (a requeue, or the next `ablate run`), and two arrays never train a trial twice.

`cluster` is submitit's executor: "slurm" for a cluster, "local" (a process per task on this
machine) and "debug" (in this process) for tests. Importing this module registers launcher
"slurm" (`ablate.launch.registry`); submitit itself is imported only when an array is submitted."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ablate.base.errors import ConfigError
from ablate.launch.registry import LaunchRequest, register_launcher
from ablate.launch.slurm_options import SlurmOptions
from ablate.study.runner import Launcher, RunHooks, TrialOutcome
from ablate.study.slurm_array import (
    outcome_of,
    record_job,
    slurm_folder,
    train_one,
    trial_states,
    write_submission,
)
from ablate.study.study import Study, Trial

#: Seconds between two looks at the results store and the queue while waiting.
POLL_S = 5.0
UNFINISHED = (
    "its array task ended without finishing it (cancelled, killed or out of time): a rerun "
    "resumes it from its last checkpoint"
)


def run_array_task(submission: str, trial_id: str) -> dict[str, Any]:
    """One array task: train trial `trial_id` of the submission at `submission` (JSON)."""
    return train_one(submission, trial_id)


def _requeued(submission: str, trial_id: str) -> Any:
    """submitit calls this on a timeout or preemption (SIGUSR2): requeue the same task, which
    resumes the trial from its last checkpoint."""
    import submitit  # noqa: PLC0415  (only when an array is submitted)

    return submitit.helpers.DelayedSubmission(run_array_task, submission, trial_id)


# submitit requeues a task on timeout only when its function has `checkpoint`
run_array_task.checkpoint = _requeued  # type: ignore[attr-defined]


@dataclass
class Submission:
    path: Path
    job_id: str
    trials: list[Trial]
    cluster: str
    jobs: list[Any] = field(default_factory=list)


def _executor(folder: Path, study: Study, options: SlurmOptions, cluster: str, n: int) -> Any:
    import submitit  # noqa: PLC0415  (only when an array is submitted)

    executor = submitit.AutoExecutor(
        folder=folder / "logs" / "%j",
        cluster=cluster,
        slurm_max_num_timeout=options.max_requeues,
    )
    gpus = options.gpus_for(study.engines, study.device)
    executor.update_parameters(
        name=f"ablate-{study.name}",
        timeout_min=options.time_min,
        cpus_per_task=options.cpus_per_task,
        mem_gb=options.mem_gb,
        slurm_partition=options.partition,
        slurm_gpus_per_task=gpus or None,
        slurm_array_parallelism=options.array_parallelism or n,
        slurm_additional_parameters=dict(options.sbatch) or None,
    )
    return executor


def submit(
    study_file: str | Path,
    study: Study,
    trials: Sequence[Trial],
    uri: str,
    root: Path,
    options: SlurmOptions,
    cluster: str = "slurm",
) -> Submission:
    """Write the submission's JSON and submit one array of `trials`, one task each."""
    path = write_submission(
        study_file,
        study,
        trials,
        uri,
        root,
        cluster=cluster,
        cpus_per_task=options.cpus_per_task,
        slurm=asdict(options),
        gpus_per_task=options.gpus_for(study.engines, study.device),
    )
    executor = _executor(slurm_folder(root, study), study, options, cluster, len(trials))
    try:
        jobs = executor.map_array(run_array_task, [str(path)] * len(trials), [t.id for t in trials])
    except Exception as exc:  # sbatch refused it: its own words, in one line
        lines = [line for line in str(exc).splitlines() if line.strip()]
        raise ConfigError(f"sbatch refused the array: {lines[-1] if lines else exc}") from None
    job_id = str(jobs[0].job_id).split("_")[0] if jobs else ""
    record_job(path, job_id, {t.id: str(j.job_id) for t, j in zip(trials, jobs, strict=True)})
    return Submission(path, job_id, list(trials), cluster, jobs)


def tasks_left(submission: Submission) -> int:
    """Array tasks still queued or running (-1: the queue could not be asked just now)."""
    if submission.cluster != "slurm":
        return sum(not job.done() for job in submission.jobs)
    done = subprocess.run(
        ["squeue", "--noheader", "--array", "--jobs", submission.job_id, "--format", "%i"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode != 0:  # a job Slurm has forgotten (MinJobAge) is an invalid id
        return 0 if "Invalid job id" in done.stderr else -1
    return len([line for line in done.stdout.splitlines() if line.strip()])


def wait(
    submission: Submission,
    study: Study,
    uri: str,
    root: Path,
    *,
    echo: Callable[[str], None] = print,
    on_end: Callable[[TrialOutcome], None] | None = None,
    poll_s: float = POLL_S,
) -> list[TrialOutcome]:
    """Until no task of the array is left: a line whenever the trials' states change (read from
    the results store), `on_end` once per trial that ends; then one outcome per trial."""
    ended: set[str] = set()
    last = ""
    while True:
        left = tasks_left(submission)
        states = trial_states(study, submission.trials, uri, root)
        for state in states:
            if state.ended and state.trial.id not in ended and on_end is not None:
                on_end(outcome_of(state, UNFINISHED))
            if state.ended:
                ended.add(state.trial.id)
        if (line := progress_line(submission, states, left)) != last:
            echo(line)
            last = line
        if left == 0:
            break
        time.sleep(poll_s)
    outcomes = [outcome_of(s, UNFINISHED) for s in states]
    for out, state in zip(outcomes, states, strict=True):
        if state.trial.id not in ended and on_end is not None:
            on_end(out)
    return outcomes


def progress_line(submission: Submission, states: Sequence[Any], left: int) -> str:
    counts: dict[str, int] = {}
    for state in states:
        counts[state.state] = counts.get(state.state, 0) + 1
    where = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
    queue = "queue not reachable just now" if left < 0 else f"{left} array task(s) left"
    return f"array {submission.job_id}: {where}; {queue}"


def array_launcher(
    study_file: str | Path,
    study: Study,
    options: SlurmOptions,
    *,
    detach: bool = False,
    cluster: str = "slurm",
    echo: Callable[[str], None] = print,
    poll_s: float = POLL_S,
) -> Launcher:
    """What `ablate.study.runner.run_study(launch=...)` calls with the trials to run: submit them as
    one array, then wait (None when detached: the array's tasks close the study's parent);
    `hooks.on_trial_end` hears of each trial as it ends."""

    def launch_trials(
        todo: list[Trial], uri: str, root: Path, hooks: RunHooks
    ) -> list[TrialOutcome] | None:
        if not todo:
            return []
        sub = submit(study_file, study, todo, uri, root, options, cluster)
        echo(f"submitted {len(todo)} trial(s) as array job {sub.job_id} ({sub.path})")
        if detach:
            return None
        try:
            on_end = hooks.on_trial_end
            return wait(sub, study, uri, root, echo=echo, on_end=on_end, poll_s=poll_s)
        except KeyboardInterrupt:
            echo(f"stopped waiting; the array keeps running (scancel {sub.job_id} stops it)")
            raise

    return launch_trials


def check_reachable(options: SlurmOptions) -> None:
    """`--launcher slurm` needs Slurm's client commands on this machine (a login node)."""
    del options  # every option is Slurm's to judge, at submission
    missing = [c for c in ("sbatch", "squeue", "scancel") if shutil.which(c) is None]
    if missing:
        raise ConfigError(
            f"--launcher slurm: {', '.join(missing)} not found on PATH: run `ablate run` on a "
            "Slurm login node (or use --launcher local, or `ablate worker` on machines without "
            "Slurm)"
        )


@register_launcher(
    "slurm",
    options=SlurmOptions,
    summary="one Slurm job array through submitit, one task per trial",
    check=check_reachable,
    detach=True,
    instead_of_workers="every trial is its own array task (--slurm-array-parallelism caps how "
    "many run at once)",
)
def build(request: LaunchRequest) -> Launcher:
    """The array launcher of a request (the CLI's lines for its progress)."""
    return array_launcher(
        request.study_file,
        request.study,
        request.options,
        detach=request.detach,
        echo=request.echo,
    )
