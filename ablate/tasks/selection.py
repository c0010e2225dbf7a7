"""`selection_split`: another task with a selection split carved out of its train split, for
choosing settings (a study's per-arm tuning, `ablate.study.tuning`) without reading its eval split.

Its "eval" split is the first `held` problems of the task's train split, and its "train" split
the rest of them, so a trial of it trains on no problem it is selected on and never touches the
task's own eval split (on which a study's verdicts are read). Verification, rewards and worked
solutions are the task's own.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ablate.base.errors import ConfigError
from ablate.tasks.base import Problem, Split, Task, Verdict, check_split, get_task, register_task
from ablate.tasks.templates import Template

NAME = "selection_split"


@register_task
@dataclass(frozen=True, kw_only=True)
class SelectionSplit(Task):
    name = NAME
    of: str
    """The task the split is carved from (a `get_task` name)."""
    of_options: tuple[tuple[str, Any], ...] = ()
    """Its options, as sorted (key, value) pairs."""
    held: int = 64
    """Problems of the selection split: the first ones of the task's train split."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.held, int) or self.held < 1:
            raise ConfigError(f"{NAME}: held={self.held!r} must be an integer >= 1")
        if self.of == NAME:
            raise ConfigError(f"{NAME}: cannot carve a selection split out of another one")

    @cached_property
    def task(self) -> Task:
        return get_task(self.of, **dict(self.of_options))

    def problems(self, split: Split) -> list[Problem]:
        train = self.task.problems("train")  # the task's eval split is never read
        if len(train) <= self.held:
            raise ConfigError(
                f"{NAME}: task {self.of!r} has {len(train)} train problems, not more than the "
                f"{self.held} held out for selection: lower the selection problems"
            )
        return train[: self.held] if check_split(NAME, split) == "eval" else train[self.held :]

    def verify(
        self, problem: Problem, completion: str, template: Template, parse: str = "strict"
    ) -> Verdict:
        return self.task.verify(problem, completion, template, parse)

    def _verify(self, problem: Problem, completion: str, template: Template) -> Verdict:
        return self.task._verify(problem, completion, template)

    def score(self, correct: bool, format_ok: bool) -> float:
        return self.task.score(correct, format_ok)

    def sample_solution(self, problem: Problem, template: Template, rng: random.Random) -> str:
        return self.task.sample_solution(problem, template, rng)
