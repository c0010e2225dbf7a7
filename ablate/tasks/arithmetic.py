"""Multi-step addition with a worked chain of partial sums and optional self-checks.

One completion under `plain` (prompt `Question: 28+65+18\\nAnswer:`):

- layout "pre"  (check before the answer, written with probability `check_rate`):
  ` 28+65=93;93+18=111;ck:18+65=83;83+28=111;#### 111`
- layout "tail" (mandatory check, answer, then 0..`max_tail` reward-neutral re-check lines,
  each further one with probability `check_rate`):
  ` 28+65=93;93+18=111;ck:18+65=83;83+28=111;#### 111\\nrk:18+65+28=111`

Why two layouts (measured on the zoo models): a check before the answer is one more chance to
slip, so every algorithm learns to drop it. For the Dr. GRPO length bias to have a chance, a
length choice must be reward-neutral and come after a state where an error is visible;
in "tail" a mismatch between the mandatory check and the main result precedes the optional tail.
`Verdict.mismatch` records that mismatch and `Verdict.self_check` the optional part (the check in
"pre", the tail in "tail"), so "tail rate | mismatch" can be logged per algorithm.

`shuffle_steps` draws the operand order of the chain, the check and the tail at random (several
valid continuations per position: a higher-entropy base model, so the upper clip can bind).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import ClassVar, Literal

from ablate.base.errors import ConfigError
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
from ablate.tasks.synthetic import draw_splits, extra_lines
from ablate.tasks.templates import Template

CHECK_MARK = "ck:"
TAIL_MARK = "rk:"
_CHAIN_CHARS = frozenset("0123456789+=;")
_DIAGNOSTIC_CHARS = 2000  # only the head of a completion is parsed for check / mismatch
_MAX_ANSWER_DIGITS = 18


@dataclass(frozen=True)
class Level:
    """A difficulty: how many operands (with weights) and their range."""

    counts: tuple[int, ...]
    weights: tuple[float, ...]
    low: int
    high: int


#: Problem subsets by the rl_ready rung's measured pass rate ("easy": rewards concentrated on 1,
#: "hard": on 0), written by `python -m devtools arithmetic-subsets`; valid for the task options
#: they record.
SUBSETS_FILE = Path(__file__).parent / "data" / "arithmetic_subsets.json"
SUBSETS = ("easy", "hard")

LEVELS: dict[str, Level] = {
    # 3 operands only: 2-operand sums have too few distinct problems (4,950 multisets) to fill
    # a 20k train split without skewing the mix
    "easy": Level(counts=(3,), weights=(1.0,), low=1, high=99),
    "medium": Level(counts=(3, 4), weights=(0.7, 0.3), low=1, high=99),  # the measured design
    "hard": Level(counts=(4, 5), weights=(0.7, 0.3), low=1, high=99),
}


def chain(operands: tuple[int, ...]) -> str:
    """The partial-sum chain `28+65=93;93+18=111;`."""
    total, steps = operands[0], []
    for x in operands[1:]:
        steps.append(f"{total}+{x}={total + x};")
        total += x
    return "".join(steps)


def parse_answer_int(answer: str | None) -> int | None:
    """The answer as a non-negative integer, or None (bounded: never converts a huge string)."""
    if answer is None:
        return None
    text = answer.strip()
    if not 0 < len(text) <= _MAX_ANSWER_DIGITS or not text.isascii() or not text.isdigit():
        return None
    return int(text)


def chain_result(text: str, start: int) -> int | None:
    """The result of the chain that starts at `text[start]`: the number after its last `=`."""
    end = start
    while end < len(text) and text[end] in _CHAIN_CHARS:
        end += 1
    run = text[start:end]
    eq = run.rfind("=")
    if eq < 0:
        return None
    digits = run[eq + 1 :].split(";", 1)[0].split("+", 1)[0]
    return parse_answer_int(digits)


def check_results(completion: str) -> tuple[int | None, int | None]:
    """(main chain result, check chain result) of a completion; None where absent."""
    head = completion[:_DIAGNOSTIC_CHARS].lstrip()
    main = chain_result(head, 0)
    pos = head.find(CHECK_MARK)
    check = chain_result(head, pos + len(CHECK_MARK)) if pos >= 0 else None
    return main, check


@register_task
@dataclass(frozen=True, kw_only=True)
class ArithmeticTask(Task):
    """Sums of 3-4 operands (at 'medium') with a worked chain; reward 1 iff the extracted answer
    equals the sum."""

    name: ClassVar[str] = "arithmetic"
    layout: Literal["pre", "tail"] = "pre"
    """'pre': optional check before the answer; 'tail': mandatory check, answer, optional tail."""
    shuffle_steps: bool = False
    """Random operand order in chain / check / tail (higher-entropy corpus)."""
    difficulty: str = "medium"
    """'easy' (3 operands), 'medium' (3 or 4, 70/30), 'hard' (4 or 5, 70/30); operands 1-99."""
    check_rate: float = 0.25
    """Probability of the optional check ('pre') or of each further tail line ('tail')."""
    max_tail: int = 2
    """Most re-check lines in the 'tail' layout."""
    seed: int = 0
    n_train: int = 20_000
    n_eval: int = 256
    subset: str = "all"
    """'all'; 'easy' / 'hard': the problems the rl_ready rung solves often / rarely (measured)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice(self.name, "subset", self.subset, ("all", *SUBSETS))
        check_choice(self.name, "layout", self.layout, ("pre", "tail"))
        check_choice(self.name, "difficulty", self.difficulty, LEVELS)
        if not 0.0 <= self.check_rate <= 1.0:
            raise ConfigError(f"arithmetic: check_rate must be in [0, 1], got {self.check_rate}")

    @cached_property
    def _splits(self) -> dict[Split, list[Problem]]:
        level = LEVELS[self.difficulty]

        def draw(gen: random.Random) -> tuple[int, ...]:
            count = gen.choices(level.counts, weights=level.weights)[0]
            return tuple(gen.randint(level.low, level.high) for _ in range(count))

        drawn = draw_splits(
            f"arithmetic:{self.difficulty}",
            self.seed,
            {"train": self.n_train, "eval": self.n_eval},
            draw,
            key=lambda ops: tuple(sorted(ops)),
        )
        return {split: [self._problem(ops) for ops in items] for split, items in drawn.items()}

    def _problem(self, operands: tuple[int, ...]) -> Problem:
        question = "+".join(map(str, operands))
        return Problem(
            id=stable_id(self.name, question),
            question=question,
            answer=str(sum(operands)),
            data={"operands": operands},
        )

    def problems(self, split: Split) -> list[Problem]:
        problems = self._splits[check_split(self.name, split)]
        if self.subset == "all":
            return list(problems)
        keep = subset_ids(self, self.subset, split)
        return [p for p in problems if p.id in keep]

    def _orders(self, operands: tuple[int, ...], rng: random.Random) -> tuple[tuple, tuple]:
        if self.shuffle_steps:
            n = len(operands)
            return tuple(rng.sample(operands, n)), tuple(rng.sample(operands, n))
        return operands, operands[::-1]

    def sample_solution(self, problem: Problem, template: Template, rng: random.Random) -> str:
        operands = tuple(problem.data["operands"])
        main, check = self._orders(operands, rng)
        lead = completion_lead(template, problem.question)
        answer = template.write_answer(problem.answer)
        checked = f"{CHECK_MARK}{chain(check)}"
        if self.layout == "pre":
            return lead + chain(main) + (checked if rng.random() < self.check_rate else "") + answer
        return lead + chain(main) + checked + answer + self._tail(operands, answer, template, rng)

    def _tail(self, operands: tuple, answer: str, template: Template, rng: random.Random) -> str:
        """Re-check lines after the answer; none where the answer ends generation (r1's stop)."""
        if any(answer.endswith(stop) for stop in template.stop):
            return ""
        lines = []
        for _ in range(extra_lines(rng, self.check_rate, self.max_tail)):
            order = rng.sample(operands, len(operands)) if self.shuffle_steps else operands[::-1]
            lines.append(f"\n{TAIL_MARK}{'+'.join(map(str, order))}={sum(operands)}")
        return "".join(lines)

    def _verify(self, problem: Problem, completion: str, template: Template) -> Verdict:
        answer = template.extract(completion)
        value = parse_answer_int(answer)
        format_ok = value is not None
        correct = format_ok and value == int(problem.answer)
        main, check = check_results(completion)
        optional_mark = CHECK_MARK if self.layout == "pre" else TAIL_MARK
        return Verdict(
            reward=self.score(correct, format_ok),
            correct=correct,
            answer=None if answer is None else answer[:200],
            format_ok=format_ok,
            self_check=optional_mark in completion,
            mismatch=None if main is None or check is None else main != check,
        )


@cache
def _subsets() -> dict:
    return json.loads(SUBSETS_FILE.read_text())


def subset_ids(task: ArithmeticTask, subset: str, split: Split) -> frozenset[str]:
    """The ids of `subset`'s problems in `split`; ConfigError when `task`'s other options are not
    the ones the subset was measured under (its ids would select different problems)."""
    data = _subsets()
    measured = data["task_options"]
    mine = {k: getattr(task, k) for k in measured}
    if mine != measured:
        differ = [f"{k}={mine[k]!r} (measured: {measured[k]!r})" for k in measured]
        differ = [d for d, k in zip(differ, measured, strict=True) if mine[k] != measured[k]]
        raise ConfigError(
            f"arithmetic: subset={subset!r} was measured with other options: {', '.join(differ)}"
        )
    return frozenset(data["subsets"][subset][split])
