"""Countdown: reach a target from given numbers with + - * / (each number at most once).

Problems are built backwards from a random expression over the numbers, so each one is
solvable; the reference answer is that expression. A completion's answer is parsed with the
bounded evaluator in `safe_eval` (never `eval`) and checked exactly with `Fraction`s.

One completion under `plain` (prompt `Question: Make 98 from 44, 19, 35 using ...\\nAnswer:`):
` 44+35=79;79+19=98;#### (44+35)+19`
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

from ablate.tasks.base import (
    Problem,
    Split,
    Task,
    Verdict,
    check_choice,
    check_split,
    completion_lead,
    register_task,
    stable_id,
)
from ablate.tasks.safe_eval import ExpressionError, evaluate
from ablate.tasks.synthetic import draw_splits
from ablate.tasks.templates import Template


@dataclass(frozen=True)
class Level:
    counts: tuple[int, ...]
    high: int
    max_target: int


LEVELS: dict[str, Level] = {
    "easy": Level(counts=(3,), high=20, max_target=100),
    "medium": Level(counts=(3, 4), high=99, max_target=100),  # as TinyZero's Countdown-3to4
    "hard": Level(counts=(4, 5), high=99, max_target=999),
}


@dataclass(frozen=True)
class Construction:
    numbers: tuple[int, ...]
    target: int
    expression: str
    steps: tuple[str, ...]


def _combine(a: int, b: int, gen: random.Random) -> tuple[str, int]:
    """A random operator that keeps every intermediate value a positive integer."""
    results = {"+": a + b, "*": a * b}
    if a > b:
        results["-"] = a - b
    if b > 1 and a % b == 0:
        results["/"] = a // b
    op = gen.choice(list(results))
    return op, results[op]


def build(numbers: tuple[int, ...], gen: random.Random) -> Construction:
    """Combine random pairs until one value is left; record the expression and its steps."""
    pool = [(n, str(n)) for n in numbers]
    steps = []
    while len(pool) > 1:
        i, j = gen.sample(range(len(pool)), 2)
        (a, text_a), (b, text_b) = pool[i], pool[j]
        op, value = _combine(a, b, gen)
        steps.append(f"{a}{op}{b}={value};")
        pool = [p for k, p in enumerate(pool) if k not in (i, j)]
        pool.append((value, f"({text_a}{op}{text_b})"))
    value, text = pool[0]
    expression = text[1:-1] if text.startswith("(") else text
    return Construction(numbers, value, expression, tuple(steps))


@register_task
@dataclass(frozen=True, kw_only=True)
class CountdownTask(Task):
    """Reward 1 iff the answer expression evaluates to the target using only given numbers."""

    name: ClassVar[str] = "countdown"
    difficulty: str = "medium"
    """'easy' (3 numbers 1-20), 'medium' (3-4 numbers 1-99, target <= 100), 'hard' (4-5)."""
    use_all: bool = False
    """Require every number to be used exactly once (TinyZero's rule) instead of at most once."""
    seed: int = 0
    n_train: int = 20_000
    n_eval: int = 256

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice(self.name, "difficulty", self.difficulty, LEVELS)

    def _draw(self, gen: random.Random) -> Construction:
        level = LEVELS[self.difficulty]
        while True:
            count = gen.choice(level.counts)
            built = build(tuple(gen.randint(1, level.high) for _ in range(count)), gen)
            if 1 <= built.target <= level.max_target:
                return built

    @cached_property
    def _splits(self) -> dict[Split, list[Problem]]:
        drawn = draw_splits(
            f"countdown:{self.difficulty}",
            self.seed,
            {"train": self.n_train, "eval": self.n_eval},
            self._draw,
            key=lambda c: (tuple(sorted(c.numbers)), c.target),
        )
        return {split: [self._problem(c) for c in items] for split, items in drawn.items()}

    def _problem(self, built: Construction) -> Problem:
        shown = ", ".join(map(str, built.numbers))
        question = f"Make {built.target} from {shown} using + - * / (each number at most once)."
        if self.use_all:
            question = question.replace("at most once", "exactly once")
        data = {"numbers": built.numbers, "target": built.target, "steps": built.steps}
        return Problem(stable_id(self.name, question), question, built.expression, data)

    def problems(self, split: Split) -> list[Problem]:
        return list(self._splits[check_split(self.name, split)])

    def sample_solution(self, problem: Problem, template: Template, rng: random.Random) -> str:
        steps = "".join(problem.data["steps"])
        return (
            completion_lead(template, problem.question)
            + steps
            + template.write_answer(problem.answer)
        )

    def _verify(self, problem: Problem, completion: str, template: Template) -> Verdict:
        answer = template.extract(completion)
        if answer is None:
            return Verdict(self.score(False, False), False, None, False)
        try:  # `(44+35)+19 = 98` is accepted: only the left side is the expression
            value, used = evaluate(answer.split("=", 1)[0])
        except ExpressionError:
            return Verdict(self.score(False, False), False, answer[:200], False)
        given, counted = Counter(problem.data["numbers"]), Counter(used)
        allowed = counted == given if self.use_all else not counted - given
        correct = allowed and value == problem.data["target"]
        return Verdict(self.score(correct, True), correct, answer[:200], True)
