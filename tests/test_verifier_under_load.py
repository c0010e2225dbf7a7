"""Rewards do not depend on how busy the machine is: every task's verifier gives the same
verdicts with spinning processes on every core as idle (the verifier's limits are CPU time)."""

from __future__ import annotations

import random

import pytest

from ablate.tasks import get_task
from ablate.tasks.math_check import shared_verifier
from ablate.testing.load import busy_machine, cpu_share
from tests.test_tasks_local import MATH, QWEN, math_problem

MATH_ANSWERS = ("0.75", "3/4", "\\frac{6}{8}", "\\frac{1}{2}", "\\dfrac{3}{4}", "0.7500")


def math_verdicts(task) -> list[tuple]:
    problem = math_problem(task, "\\frac{3}{4}")
    verdicts = [task.verify(problem, f"so \\boxed{{{pred}}}", QWEN) for pred in MATH_ANSWERS]
    return [(v.correct, v.error, v.reward) for v in verdicts]


def synthetic_cases(name: str) -> tuple:
    """The task and (problem, completion) pairs: right, cut short and answerless, built idle."""
    task = get_task(name)
    rng = random.Random(0)
    cases = []
    for problem in task.problems("eval")[:8]:
        right = task.sample_solution(problem, QWEN, rng)
        cases += [(problem, c) for c in (right, right[: len(right) // 2], "no answer")]
    return task, cases


def synthetic_verdicts(task, cases) -> list[tuple]:
    verdicts = [task.verify(problem, completion, QWEN) for problem, completion in cases]
    return [(v.correct, v.error, v.reward) for v in verdicts]


def test_the_math_verifier_gives_the_same_verdicts_on_a_busy_machine_as_idle():
    task = get_task("math", path=str(MATH), n_eval=2, time_limit=1.0)
    shared_verifier().close()  # start-up under the load too
    with busy_machine() as spinners:
        assert cpu_share() < 0.5, f"{spinners} spinning processes did not load the machine"
        busy = math_verdicts(task)
    idle = math_verdicts(task)
    assert idle == [(c, None, float(c)) for c in (True, True, True, False, True, True)]
    assert busy == idle


@pytest.mark.parametrize("name", ["arithmetic", "countdown"])
def test_synthetic_verifiers_give_the_same_verdicts_on_a_busy_machine_as_idle(name):
    task, cases = synthetic_cases(name)
    with busy_machine():
        busy = synthetic_verdicts(task, cases)
    idle = synthetic_verdicts(task, cases)
    assert any(correct for correct, _, _ in idle) and not all(c for c, _, _ in idle)
    assert busy == idle


def test_a_processs_cpu_time_is_read_from_proc_as_the_kernel_counts_it():
    import os

    from ablate.tasks.math_check import process_cpu_seconds

    cpu_share(0.1)  # some CPU to count
    times = os.times()
    read = process_cpu_seconds(os.getpid())
    assert read is not None
    assert abs(read - (times.user + times.system)) < 0.05  # a clock tick or two apart
    assert process_cpu_seconds(2**22 + 1) is None  # no such process
