"""Countdown task and its bounded expression evaluator."""

from __future__ import annotations

import random
from collections import Counter
from fractions import Fraction

import pytest

from ablate.base.errors import ConfigError
from ablate.tasks import get_task
from ablate.tasks.base import Problem
from ablate.tasks.safe_eval import MAX_DEPTH, ExpressionError, evaluate
from ablate.tasks.templates import get_template, template_names

PLAIN = get_template("plain")


@pytest.mark.parametrize(
    "text, value, numbers",
    [
        ("(44+35)+19", 98, (44, 35, 19)),
        ("2*3+4", 10, (2, 3, 4)),  # precedence
        ("2*(3+4)", 14, (2, 3, 4)),
        ("8/3*3", 8, (8, 3, 3)),  # exact: a float would give 7.999...
        ("1-2-3", -4, (1, 2, 3)),  # left associative
        (" 7 ", 7, (7,)),
        ("1/3", Fraction(1, 3), (1, 3)),
    ],
)
def test_evaluator_on_hand_computed_expressions(text, value, numbers):
    assert evaluate(text) == (Fraction(value), numbers)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "9**9**9**9",
        "2^3",
        "-5",
        "1 2",
        "(1+2",
        "1+2)",
        "1/0",
        "1/(2-2)",
        "1234567890",  # 10 digits
        "x+1",
        "__import__('os')",
        "(" * (MAX_DEPTH + 1) + "1" + ")" * (MAX_DEPTH + 1),
        "1+" * 200 + "1",  # longer than the cap
        "999999999*999999999*999999999",  # past the magnitude cap
    ],
)
def test_evaluator_rejects_invalid_or_unbounded_input(text):
    with pytest.raises(ExpressionError):
        evaluate(text)


def test_evaluator_accepts_nesting_up_to_the_cap():
    assert evaluate("(" * MAX_DEPTH + "5" + ")" * MAX_DEPTH)[0] == 5


def small(**options):
    return get_task("countdown", n_train=1000, n_eval=100, **options)


def test_generation_is_deterministic_disjoint_and_solvable():
    a, b = small(seed=1), small(seed=1)
    assert a.problems("train") == b.problems("train") and a.problems("eval") == b.problems("eval")
    key = lambda p: (tuple(sorted(p.data["numbers"])), p.data["target"])  # noqa: E731
    assert not {key(p) for p in a.problems("train")} & {key(p) for p in a.problems("eval")}
    for p in a.problems("eval"):
        value, used = evaluate(p.answer)
        assert value == p.data["target"] and 1 <= value <= 100
        assert Counter(used) == Counter(p.data["numbers"])
        assert str(p.data["target"]) in p.question


@pytest.mark.parametrize("name", template_names())
def test_sampled_solutions_verify_correct(name):
    task, template, rng = small(), get_template(name), random.Random(0)
    for p in task.problems("eval")[:30]:
        verdict = task.verify(p, task.sample_solution(p, template, rng), template)
        assert verdict.correct and verdict.reward == 1.0 and verdict.error is None


def hand_problem() -> Problem:
    data = {"numbers": (44, 19, 35), "target": 98, "steps": ()}
    return Problem("countdown-hand", "Make 98 from 44, 19, 35", "(44+35)+19", data)


@pytest.mark.parametrize(
    "answer, correct, format_ok",
    [
        ("19+44+35", True, True),  # another valid order
        ("44 + 35 + 19 = 98", True, True),  # trailing '= target' tolerated
        ("44+35+19+0", False, True),  # 0 is not a given number
        ("44+44+10", False, True),  # 44 used twice, 10 not given
        ("44+35", False, True),  # wrong value
        ("98", False, True),  # the target itself is not a given number
        ("44+35+19)", False, False),
        ("forty-four", False, False),
    ],
)
def test_verifier_on_hand_written_answers(answer, correct, format_ok):
    v = small().verify(hand_problem(), f" thinking #### {answer}", PLAIN)
    assert (v.correct, v.format_ok, v.error) == (correct, format_ok, None)


def test_use_all_requires_every_number():
    problem = hand_problem()
    assert small().verify(problem, "#### 44+54", PLAIN).correct is False  # 54 not given
    problem = Problem("h", "q", "a", {"numbers": (44, 19, 35, 2), "target": 98, "steps": ()})
    assert small().verify(problem, "#### 44+35+19", PLAIN).correct
    assert not small(use_all=True).verify(problem, "#### 44+35+19", PLAIN).correct


def test_unknown_difficulty_raises():
    with pytest.raises(ConfigError, match="medium"):
        get_task("countdown", difficulty="insane")
