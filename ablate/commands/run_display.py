"""`ablate run`'s displays of a running study, each a context manager yielding the runner's
hooks: rich bars on a terminal (`study_bars`), plain flushed lines otherwise (`study_lines`)."""

from __future__ import annotations

import contextlib
from typing import Any


@contextlib.contextmanager
def study_bars(console, workers: int = 1):
    """Rich bars: the study's row (trials done / running / left, time to go), the Pass@G
    phase, the trial in this process or one bar per trial in a worker."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ablate.commands.progress import study_bar, study_remaining_column, watch_study
    from ablate.commands.study_progress import StudyWatch
    from ablate.study.runner import RunHooks

    columns = [
        TextColumn("{task.description:<44}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        study_remaining_column(),
    ]
    with Progress(*columns, console=console) as bar:
        watch = StudyWatch(workers)
        show = study_bar(bar, watch)  # the study's row: trials done / running / left, time to go
        steps = bar.add_task("pass@G phase", total=None)

        def on_trial_start(trial, index, total) -> None:
            label = f"{trial.arm} | {trial.spec.model} | s{trial.spec.seed}"
            bar.reset(steps, total=trial.spec.budget.max_steps, description=label[:44])

        def on_step(step, total, metrics) -> None:
            bar.update(steps, completed=step)

        def on_passk(label, done, total) -> None:
            bar.update(steps, description=f"pass@G {label}"[:44], completed=done, total=total)

        running: dict[str, Any] = {}  # workers > 1: one bar per trial in a worker
        ended: set[str] = set()

        def on_trial_step(trial, step, total, metrics) -> None:
            if trial.id in ended:  # a step relayed after its trial's end
                return
            if trial.id not in running:
                bar.update(steps, visible=False)
                label = f"{trial.arm} | {trial.spec.model} | s{trial.spec.seed}"
                running[trial.id] = bar.add_task(label[:44], total=trial.spec.budget.max_steps)
            if step:
                bar.update(running[trial.id], completed=step, total=total)

        def on_trial_end(out) -> None:
            ended.add(out.trial_id)
            if (task := running.pop(out.trial_id, None)) is not None:
                bar.remove_task(task)

        hooks = RunHooks(
            on_trial_start=on_trial_start,
            on_step=on_step,
            on_passk=on_passk,
            on_trial_end=on_trial_end,
            on_trial_step=on_trial_step,
        )
        yield watch_study(hooks, slots=workers, show=show, every=0, watch=watch)


@contextlib.contextmanager
def study_lines(every: int, workers: int = 1):
    """Plain, flushed lines: each phase, each trial's start and end, every `every` steps; the
    study's progress after each trial's start and end and every few minutes."""
    from ablate.commands.progress import (
        StepLines,
        outcome_text,
        passk_lines,
        say,
        trial_label,
        watch_study,
    )
    from ablate.study.runner import RunHooks

    steps = StepLines(every)
    in_workers: dict[str, StepLines] = {}  # workers > 1: each trial's own lines

    def on_trial_start(trial, index, total) -> None:
        steps.start(f"trial {index + 1}/{total}")
        say(f"trial {index + 1}/{total}: {trial_label(trial)} (id {trial.id})")

    def on_trial_step(trial, step, total, metrics) -> None:
        if trial.id not in in_workers:
            in_workers[trial.id] = StepLines(every)
            in_workers[trial.id].start(trial_label(trial))
        if step == 0:
            say(f"trial started in a worker: {trial_label(trial)} (id {trial.id})")
        else:
            in_workers[trial.id](step, total, metrics)

    def on_trial_end(out) -> None:
        where = f"{out.arm} | {out.model} | {out.template} | seed {out.seed}"
        say(f"trial ended: {where}: {outcome_text(out)}")

    hooks = RunHooks(
        on_phase=lambda phase: say(f"phase: {'Pass@G' if phase == 'passk' else phase}"),
        on_trial_start=on_trial_start,
        on_step=steps,
        on_passk=passk_lines(),
        on_trial_end=on_trial_end,
        on_trial_step=on_trial_step,
    )
    yield watch_study(hooks, slots=workers, show=say)
