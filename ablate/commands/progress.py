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
