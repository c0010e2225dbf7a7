"""A study's progress in one line: trials done / running / left and the time still to go.

Pure bookkeeping, with the time passed in: `StudyProgress.update(states, step_seconds)` turns
the trials' states and the measured seconds per step into the line; `StepClock` measures the
seconds per step from when trials start, step and end; `StudyWatch` keeps both for a running
study. Any display (`ablate run`'s bars and plain lines, a scheduler's wait loop) can use them.

The estimate: every trial still to run costs its steps not yet trained × the measured seconds
per step (its `max_steps`, an upper bound for a token budget that stops it early), and the
trials are laid out over the parallel slots as the runner does, each next trial on the first
slot to come free; the time to go is when the last slot is done."""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

LEFT, RUNNING, DONE = "left", "running", "done"


@dataclass(frozen=True)
class TrialState:
    """One trial of the study as progress sees it: its step budget, the steps trained so far
    (a resumed trial's count starts at its checkpoint) and whether it is left, running or
    done (ended in any way: finished, diverged, failed or skipped)."""

    total_steps: int
    steps_done: int = 0
    status: str = LEFT

    def steps_to_go(self) -> int:
        return 0 if self.status == DONE else max(0, self.total_steps - self.steps_done)


@dataclass(frozen=True)
class Counts:
    done: int
    running: int
    left: int

    @property
    def total(self) -> int:
        return self.done + self.running + self.left


def counts(states: Iterable[TrialState]) -> Counts:
    statuses = [s.status for s in states]
    return Counts(statuses.count(DONE), statuses.count(RUNNING), statuses.count(LEFT))


def seconds_left(
    states: Sequence[TrialState], step_seconds: float | None, slots: int = 1
) -> float | None:
    """Seconds until the last trial is done: running trials keep their slots, left trials take
    the first slot to come free, in order; None before any step was measured."""
    if step_seconds is None or not math.isfinite(step_seconds):
        return None
    running = [s.steps_to_go() * step_seconds for s in states if s.status == RUNNING]
    left = [s.steps_to_go() * step_seconds for s in states if s.status == LEFT]
    free_at = running + [0.0] * max(0, slots - len(running))  # when each slot comes free
    heapq.heapify(free_at)
    for seconds in left:
        heapq.heappush(free_at, heapq.heappop(free_at) + seconds)
    return max(free_at, default=0.0)


def duration_text(seconds: float) -> str:
    """`45s`, `12m30s`, `3h05m`: seconds up to a minute, minutes up to an hour, then hours."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    minutes = round(whole / 60)
    return f"{minutes // 60}h{minutes % 60:02d}m"


@dataclass
class StudyProgress:
    """The study's progress line for `slots` parallel trials; `update` keeps the last counts
    and estimate for a display that shows them apart (a bar's columns)."""

    slots: int = 1
    counts: Counts = field(default_factory=lambda: Counts(0, 0, 0))
    seconds_left: float | None = None

    def update(self, states: Sequence[TrialState], step_seconds: float | None) -> str:
        """`study: 3 of 12 trials done, 2 running, 7 left; about 12m30s to go (4.20 s/step,
        2 in parallel)`."""
        self.counts = counts(states)
        self.seconds_left = seconds_left(states, step_seconds, self.slots)
        c = self.counts
        text = f"study: {c.done} of {c.total} trials done, {c.running} running, {c.left} left"
        if c.running + c.left == 0:
            return text
        if self.seconds_left is None:
            return f"{text}; time to go: measured after the first steps"
        parallel = f", {self.slots} in parallel" if self.slots > 1 else ""
        return (
            f"{text}; about {duration_text(self.seconds_left)} to go "
            f"({step_seconds:.2f} s/step{parallel})"
        )


@dataclass
class _Timing:
    started: float | None = None
    first: tuple[int, float] | None = None  # (step, time) of the first step seen
    last: tuple[int, float] | None = None
    whole: tuple[int, float] | None = None  # (steps, seconds) of an ended trial, start to end


class StepClock:
    """Seconds per step, from each trial's start, steps and end at times the caller gives.
    Once a trial has ended: its whole time (loading, evals and the final eval included) over
    the steps it trained, summed over the ended trials; before that, the time between the
    first and the last step seen, over the steps between them, summed over running trials."""

    def __init__(self) -> None:
        self._trials: dict[str, _Timing] = {}

    def start(self, key: str, now: float) -> None:
        self._trials[key] = _Timing(started=now)

    def step(self, key: str, step: int, now: float) -> None:
        timing = self._trials.setdefault(key, _Timing())
        if timing.first is None:
            timing.first = (step, now)
        timing.last = (step, now)

    def end(self, key: str, now: float) -> None:
        timing = self._trials.get(key)
        if timing is None or timing.first is None or timing.started is None:
            return  # no step trained in this run: nothing measured
        steps = timing.last[0] - timing.first[0] + 1
        timing.whole = (steps, now - timing.started)

    def seconds_per_step(self) -> float | None:
        whole = [t.whole for t in self._trials.values() if t.whole and t.whole[0] > 0]
        if whole:
            return sum(s for _, s in whole) / sum(n for n, _ in whole)
        spans = [
            (t.last[0] - t.first[0], t.last[1] - t.first[1])
            for t in self._trials.values()
            if t.whole is None and t.first is not None and t.last[0] > t.first[0]
        ]
        if not spans:
            return None
        return sum(s for _, s in spans) / sum(n for n, _ in spans)


class StudyWatch:
    """A running study's trial states and step times (keyed by trial id), and its line."""

    def __init__(self, slots: int = 1) -> None:
        self.states: dict[str, TrialState] = {}
        self.clock = StepClock()
        self.progress = StudyProgress(slots=max(1, slots))

    def plan(self, todo: Iterable[tuple[str, int]], finished: int = 0) -> None:
        """The trials this run will train, as (id, step budget), and how many trials of the
        study had finished before it."""
        for i in range(finished):
            self.states[f"finished before {i}"] = TrialState(0, 0, DONE)
        for key, total_steps in todo:
            self.states.setdefault(key, TrialState(total_steps))

    def start(self, key: str, total_steps: int, now: float) -> None:
        state = self.states.get(key, TrialState(total_steps))
        self.states[key] = replace(state, total_steps=total_steps, status=RUNNING)
        self.clock.start(key, now)

    def step(self, key: str, step: int, total_steps: int, now: float) -> None:
        state = self.states.get(key, TrialState(total_steps))
        if state.status == DONE:  # relayed after its trial's end (the queue and pipe race)
            return
        self.states[key] = TrialState(total_steps, step, RUNNING)
        if state.status == LEFT:  # no start seen (a relayed step): it started now
            self.clock.start(key, now)
        self.clock.step(key, step, now)

    def end(self, key: str, now: float) -> None:
        state = self.states.get(key, TrialState(0))
        self.states[key] = replace(state, status=DONE)
        self.clock.end(key, now)

    def line(self) -> str:
        return self.progress.update(list(self.states.values()), self.clock.seconds_per_step())
