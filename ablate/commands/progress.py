"""Progress display shared by the commands (a helper, not a command): rich bars on a terminal;
anywhere else (a pipe, a log file) one plain line every N steps, flushed at once, so the log of
a run that was killed says where it stopped."""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

#: Steps between two plain progress lines of a trial (`--log-every`).
LOG_EVERY = 10


def wants_bars(console) -> bool:
    """Progress bars only on an interactive terminal: a file or a pipe gets plain lines, also
    where FORCE_COLOR makes rich treat it as a terminal."""
    isatty = getattr(console.file, "isatty", None)
    return console.is_interactive and isatty is not None and isatty()


def say(text: str) -> None:
    """One plain progress line on stdout, time-stamped and flushed."""
    print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stdout, flush=True)


class StepLines:
    """Plain lines for one trial at a time: every `every` steps, at each eval and at the last
    step, with the step, mean reward, pass@1 (at evals), generated tokens and seconds per step."""

    def __init__(self, every: int = LOG_EVERY, write: Callable[[str], None] = say) -> None:
        self.every, self.write = max(1, every), write
        self.label = ""
        self.start("")

    def start(self, label: str) -> None:
        """A new trial: its lines carry `label`."""
        self.label, self._clock = label, time.perf_counter()
        self._first_step: int | None = None
        self._last: tuple[int, float] | None = None  # (step, seconds) of the last line

    def __call__(self, step: int, total: int, metrics: dict[str, float]) -> None:
        if self._first_step is None:  # a resumed trial starts after its checkpoint
            self._first_step = step - 1
        evaluated = "eval/pass_at_1" in metrics
        if step % self.every and not evaluated and step != total:
            return
        parts = [f"step {step}/{total}", f"reward {metrics.get('reward/mean', math.nan):.3f}"]
        if evaluated:
            parts.append(f"pass@1 {metrics['eval/pass_at_1']:.3f}")
        tokens = metrics.get("budget/generated_tokens")
        if tokens is not None:
            parts.append(f"tokens {int(tokens):,}")
        parts.append(f"{self._seconds_per_step(step, metrics):.2f} s/step")
        prefix = f"{self.label}: " if self.label else ""
        self.write(prefix + "  ".join(parts))

    def _seconds_per_step(self, step: int, metrics: dict[str, float]) -> float:
        """Seconds per RL step since the last line: the trainer's `budget/wall_seconds` (evals
        and checkpoints excluded; for the first line, the trial's mean so far), else the clock
        since this display started."""
        seconds = metrics.get("budget/wall_seconds")
        origin = (0, 0.0)
        if seconds is None:
            seconds, origin = time.perf_counter() - self._clock, (self._first_step or 0, 0.0)
        last_step, last_seconds = self._last or origin
        self._last = (step, seconds)
        return (seconds - last_seconds) / max(1, step - last_step)


def passk_lines(
    what: str = "pass@G", write: Callable[[str], None] = say
) -> Callable[[str, int, int], None]:
    """A Pass@k progress callback printing `<what> <model × template>: done/total prompts`."""

    def on_passk(label: str, done: int, total: int) -> None:
        write(f"{what} {label}: {done}/{total} prompts")

    return on_passk


@contextlib.contextmanager
def passk_display(console, what: str = "pass@G") -> Iterator[Callable[[str, int, int], None]]:
    """A Pass@k progress callback: a bar on a terminal, plain lines otherwise."""
    if not wants_bars(console):
        yield passk_lines(what)
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = [TextColumn(f"{what} {{task.description}}"), BarColumn(), MofNCompleteColumn()]
    with Progress(*columns, TimeElapsedColumn(), console=console, transient=True) as bar:
        job = bar.add_task("loading the model", total=None)

        def on_passk(label: str, done: int, total: int) -> None:
            bar.update(job, description=label, completed=done, total=total)

        yield on_passk


def trial_label(trial: Any) -> str:
    s = trial.spec
    return f"{trial.arm} | {s.model} | {s.template} | seed {s.seed}"


def outcome_text(out: Any) -> str:
    """How a trial ended, in a few words: `finished, pass@1 0.531`."""
    if out.outcome == "finished" and out.final_eval and "eval/pass_at_1" in out.final_eval:
        return f"finished, pass@1 {out.final_eval['eval/pass_at_1']:.3f}"
    return f"{out.outcome}: {out.message}" if out.message else out.outcome


#: Seconds between two plain study-progress lines while trials run (also one at each trial's
#: start and end).
STUDY_EVERY = 300.0


def watch_study(
    hooks: Any,
    *,
    slots: int,
    show: Callable[[str], None],
    every: float = STUDY_EVERY,
    clock: Callable[[], float] = time.monotonic,
    watch: Any = None,
) -> Any:
    """`hooks` (a `RunHooks`) with the study's progress added: `show(line)` after the plan and
    each trial's start and end, at the first step that makes the time to go measurable and, at
    a step, once `every` seconds have passed since the last line. `watch`: the `StudyWatch` to
    keep the progress in (a display may read its counts)."""
    import dataclasses

    from ablate.commands.study_progress import StudyWatch

    watch = watch or StudyWatch(slots)
    shown_at = [-math.inf]
    current = [""]  # workers == 1: the trial its steps belong to

    estimated = [False]  # the time to go shown once measurable, not `every` seconds later

    def emit(now: float, force: bool) -> None:
        first = not estimated[0] and watch.clock.seconds_per_step() is not None
        if force or first or now - shown_at[0] >= every:
            estimated[0] = estimated[0] or first
            shown_at[0] = now
            show(watch.line())

    def on_plan(todo, finished) -> None:
        watch.plan([(t.id, t.spec.budget.max_steps) for t in todo], finished)
        emit(clock(), True)

    def on_trial_start(trial, index, total) -> None:
        current[0] = trial.id
        watch.start(trial.id, trial.spec.budget.max_steps, now := clock())
        emit(now, True)

    def on_step(step, total, metrics) -> None:
        watch.step(current[0], step, total, now := clock())
        emit(now, False)

    def on_trial_step(trial, step, total, metrics) -> None:
        if step == 0:  # a worker started it
            return on_trial_start(trial, 0, 0)
        watch.step(trial.id, step, total, now := clock())
        emit(now, False)

    def on_trial_end(out) -> None:
        watch.end(out.trial_id, now := clock())
        emit(now, True)

    added = dict(on_plan=on_plan, on_trial_start=on_trial_start, on_step=on_step)
    added.update(on_trial_step=on_trial_step, on_trial_end=on_trial_end)
    chained = {name: _both(getattr(hooks, name), hook) for name, hook in added.items()}
    return dataclasses.replace(hooks, **chained)


def _both(first: Callable | None, then: Callable) -> Callable:
    """A hook calling `first` (if any) and then `then` with the same arguments."""

    def hook(*args) -> None:
        if first is not None:
            first(*args)
        then(*args)

    return hook


def study_bar(bar: Any, watch: Any) -> Callable[[str], None]:
    """A `show` for `watch_study` on rich bars: a row `trials (R running, L left)` with done of
    all, and the study's time to go, counting down between estimates, in the time-remaining
    column (`study_remaining_column`)."""
    task = bar.add_task("trials", total=None, done_at=None)

    def show(line: str) -> None:
        c, left = watch.progress.counts, watch.progress.seconds_left
        done_at = None if left is None else time.monotonic() + left
        description = f"trials ({c.running} running, {c.left} left)"
        bar.update(task, description=description, completed=c.done, total=c.total, done_at=done_at)

    return show


def study_remaining_column() -> Any:
    """rich's time-remaining column, but the study's own estimate in the study's row (a task
    with a `done_at` field): rich's would extrapolate from the trials done so far."""
    import datetime

    from rich.progress import TimeRemainingColumn
    from rich.text import Text

    class StudyRemaining(TimeRemainingColumn):
        def render(self, task):
            if "done_at" not in task.fields:
                return super().render(task)
            done_at = task.fields["done_at"]
            if done_at is None:
                return Text("-:--:--", style="progress.remaining")
            left = round(max(0.0, done_at - time.monotonic()))
            return Text(str(datetime.timedelta(seconds=left)), style="progress.remaining")

    return StudyRemaining()
