"""The study-level progress line of `ablate run`: counts and time to go by hand."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ablate.commands.progress import watch_study
from ablate.commands.study_progress import (
    DONE,
    LEFT,
    RUNNING,
    Counts,
    StepClock,
    StudyProgress,
    StudyWatch,
    TrialState,
    counts,
    duration_text,
    seconds_left,
)
from ablate.study.runner import RunHooks


def running(total: int, done: int) -> TrialState:
    return TrialState(total, done, RUNNING)


def test_counts_and_an_ended_trial_costs_nothing():
    states = [TrialState(10, 10, DONE), TrialState(10, 3, DONE), running(10, 4), TrialState(10)]
    assert counts(states) == Counts(done=2, running=1, left=1) and counts(states).total == 4
    assert [s.steps_to_go() for s in states] == [0, 0, 6, 10]


def test_one_slot_adds_up_every_step_to_go():
    states = [running(10, 4), TrialState(10), TrialState(5, 0, LEFT), TrialState(7, 7, DONE)]
    assert seconds_left(states, 2.0) == (6 + 10 + 5) * 2.0


def test_parallel_slots_take_the_next_trial_when_one_comes_free():
    # slots free at 10 s and 30 s; the next trial (20 s) takes the first (until 30 s), the
    # last (20 s) the first of the two free at 30 s: done at 50 s (the plain average says 40)
    states = [running(10, 5), running(20, 5), TrialState(10), TrialState(10)]
    assert seconds_left(states, 2.0, slots=2) == 50.0


def test_more_slots_than_trials_leave_the_longest_trial():
    assert seconds_left([TrialState(10)], 3.0, slots=4) == 30.0
    assert seconds_left([running(10, 8), TrialState(4)], 1.0, slots=4) == 4.0


def test_no_estimate_before_a_step_is_measured_and_none_needed_at_the_end():
    assert seconds_left([TrialState(10)], None) is None
    assert seconds_left([TrialState(10)], float("nan")) is None
    assert seconds_left([TrialState(10, 10, DONE)], 2.0, slots=3) == 0.0


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (45, "45s"),
        (59.6, "1m00s"),
        (750, "12m30s"),
        (3599.4, "59m59s"),
        (3600 + 5 * 60, "1h05m"),
        (11100, "3h05m"),
        (-3, "0s"),
    ],
)
def test_duration_text(seconds, text):
    assert duration_text(seconds) == text


def test_the_line_gives_counts_the_time_to_go_and_what_it_rests_on():
    states = [TrialState(10, 10, DONE), running(10, 5), TrialState(10)]
    progress = StudyProgress(slots=2)
    # the running trial's 5 steps: 7.5 s; the left one's 10 on the other slot: 15 s
    line = progress.update(states, 1.5)
    assert line == (
        "study: 1 of 3 trials done, 1 running, 1 left; about 15s to go (1.50 s/step, 2 in parallel)"
    )
    assert progress.counts == Counts(1, 1, 1) and progress.seconds_left == 15.0
    assert StudyProgress().update([TrialState(4)] * 2, None) == (
        "study: 0 of 2 trials done, 0 running, 2 left; time to go: measured after the first steps"
    )
    done = [TrialState(4, 4, DONE)] * 2
    assert StudyProgress().update(done, 3.0) == "study: 2 of 2 trials done, 0 running, 0 left"


def test_step_clock_between_steps_while_trials_run():
    clock = StepClock()
    assert clock.seconds_per_step() is None
    clock.start("a", 0.0)
    clock.step("a", 1, 5.0)  # loading the model: not a step's time
    assert clock.seconds_per_step() is None
    clock.step("a", 3, 9.0)
    clock.start("b", 1.0)
    clock.step("b", 1, 2.0)
    clock.step("b", 2, 8.0)
    assert clock.seconds_per_step() == pytest.approx((4.0 + 6.0) / (2 + 1))


def test_step_clock_over_whole_trials_once_one_ended():
    clock = StepClock()
    clock.start("a", 0.0)
    for step, now in [(1, 3.0), (2, 5.0), (3, 7.0), (4, 9.0)]:
        clock.step("a", step, now)
    clock.start("b", 0.0)
    clock.step("b", 1, 1.0)
    clock.step("b", 2, 2.0)  # 1 s/step so far: not used once a whole trial is measured
    clock.end("a", 12.0)  # with its final eval: 12 s for 4 steps
    assert clock.seconds_per_step() == 3.0
    clock.start("r", 20.0)  # resumed from its checkpoint at step 10
    clock.step("r", 11, 22.0)
    clock.step("r", 20, 40.0)
    clock.end("r", 41.0)  # 21 s for 10 steps
    assert clock.seconds_per_step() == pytest.approx((12.0 + 21.0) / (4 + 10))
    clock.start("s", 50.0)
    clock.end("s", 51.0)  # skipped: no step trained, nothing measured
    assert clock.seconds_per_step() == pytest.approx(33.0 / 14)


def test_study_watch_keeps_states_counts_and_ignores_a_step_after_the_end():
    watch = StudyWatch(slots=1)
    watch.plan([("a", 4), ("b", 4)], finished=1)
    assert watch.line() == (
        "study: 1 of 3 trials done, 0 running, 2 left; time to go: measured after the first steps"
    )
    watch.start("a", 4, 0.0)
    watch.step("a", 1, 4, 1.0)
    watch.step("a", 2, 4, 3.0)
    # 2 s/step; a: 2 steps to go, b: 4
    assert (
        watch.line()
        == "study: 1 of 3 trials done, 1 running, 1 left; about 12s to go (2.00 s/step)"
    )
    watch.end("a", 6.0)  # 6 s for 2 steps: b's 4 steps at 3 s
    after = "study: 2 of 3 trials done, 0 running, 1 left; about 12s to go (3.00 s/step)"
    assert watch.line() == after
    watch.step("a", 4, 4, 7.0)  # relayed late
    assert watch.line() == after
    watch.step("b", 1, 4, 8.0)  # a worker's trial whose start was not seen
    assert watch.states["b"] == TrialState(4, 1, RUNNING)


def trial(name: str, steps: int = 4):
    return SimpleNamespace(
        id=name, arm=name, spec=SimpleNamespace(budget=SimpleNamespace(max_steps=steps))
    )


def test_watch_study_shows_a_line_at_starts_and_ends_and_every_few_minutes_between():
    now, shown, calls = [0.0], [], []
    own = RunHooks(
        on_trial_start=lambda *a: calls.append("start"), on_step=lambda *a: calls.append("step")
    )
    hooks = watch_study(own, slots=1, show=shown.append, every=300, clock=lambda: now[0])
    a, b = trial("a"), trial("b")
    hooks.on_plan([a, b], 0)
    hooks.on_trial_start(a, 0, 2)
    assert calls == ["start"] and len(shown) == 2
    now[0] = 10.0
    hooks.on_step(1, 4, {})  # one step: no time per step yet
    assert len(shown) == 2
    now[0] = 110.0
    hooks.on_step(2, 4, {})  # the first measurable estimate is shown at once
    assert shown[-1] == (
        "study: 0 of 2 trials done, 1 running, 1 left; about 10m00s to go (100.00 s/step)"
    )
    now[0] = 210.0
    hooks.on_step(3, 4, {})
    assert calls == ["start", "step", "step", "step"] and len(shown) == 3  # within 5 minutes
    now[0] = 410.0
    hooks.on_step(4, 4, {})
    assert (
        shown[-1]
        == "study: 0 of 2 trials done, 1 running, 1 left; about 8m53s to go (133.33 s/step)"
    )
    now[0] = 420.0
    hooks.on_trial_end(SimpleNamespace(trial_id="a"))
    assert shown[-1].startswith("study: 1 of 2 trials done, 0 running, 1 left; about ")
    assert len(shown) == 5


def test_watch_study_counts_trials_started_in_workers():
    shown = []
    hooks = watch_study(RunHooks(), slots=2, show=shown.append, every=0, clock=lambda: 0.0)
    hooks.on_plan([trial("a"), trial("b"), trial("c")], 2)
    hooks.on_trial_step(trial("a"), 0, 0, {})
    hooks.on_trial_step(trial("b"), 0, 0, {})
    hooks.on_trial_step(trial("a"), 1, 4, {})
    assert shown[-1].startswith("study: 2 of 5 trials done, 2 running, 1 left")


def test_the_bars_study_row_counts_down_the_estimate():
    import io
    import time

    from rich.console import Console
    from rich.progress import Progress

    from ablate.commands.progress import study_bar, study_remaining_column

    watch = StudyWatch(slots=1)
    watch.plan([("a", 4), ("b", 4)], finished=1)
    watch.start("a", 4, 0.0)
    watch.step("a", 1, 4, 1.0)
    watch.step("a", 2, 4, 3.0)
    watch.line()  # 12 s to go
    column = study_remaining_column()
    with Progress(console=Console(file=io.StringIO())) as bar:
        show = study_bar(bar, watch)
        [row] = bar.tasks
        assert row.fields["done_at"] is None and str(column.render(row)) == "-:--:--"
        before = time.monotonic()
        show("")
        assert row.description == "trials (1 running, 1 left)"
        assert (row.completed, row.total) == (1, 3)
        assert before + 12.0 <= row.fields["done_at"] <= time.monotonic() + 12.0
        bar.update(row.id, done_at=time.monotonic() + 3600.4)
        assert str(column.render(row)) == "1:00:00"
        bar.update(row.id, done_at=time.monotonic() - 5)  # overrun: never negative
        assert str(column.render(row)) == "0:00:00"
        bar.add_task("a trial", total=10)
        other = bar.tasks[-1]
        assert str(column.render(other)) == "-:--:--"  # rich's own, with nothing done yet
