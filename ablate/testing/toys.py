"""A toy task and template with the interfaces of `ablate.tasks` / `ablate.tasks.templates`,
scripts for `ScriptedEngine`, and whether a zoo model is built."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ablate.base.errors import ConfigError
from ablate.models import zoo_path
from ablate.tasks.base import Problem, Verdict


@dataclass(frozen=True)
class ToyTemplate:
    """`Q: {question}\\nA:` prompts; the answer is the text after `=` up to a newline."""

    name: str = "toy"
    stop: tuple[str, ...] = ("\n",)

    def render(self, question: str) -> str:
        return f"Q: {question}\nA:"

    def extract(self, completion: str) -> str | None:
        match = re.search(r"=\s*(-?\d+)", completion)
        return match.group(1) if match else None

    def write_answer(self, answer: str) -> str:
        return f" ={answer}\n"


@dataclass
class ToyTask:
    """Additions `a+b` for the given pairs; `verify` raising for a completion containing
    `"boom"` is reported as a verdict with `error` set (as a real verifier time-out would be)."""

    pairs: Sequence[tuple[int, int]] = ((1, 2), (3, 4), (5, 6))
    name: str = "toy"

    def problems(self, split: str = "eval") -> list[Problem]:
        return [
            Problem(id=f"toy-{split}-{i}", question=f"{a}+{b}", answer=str(a + b))
            for i, (a, b) in enumerate(self.pairs)
        ]

    def verify(self, problem: Problem, completion: str, template) -> Verdict:
        if "boom" in completion:
            return Verdict(0.0, False, None, False, error="verifier crashed")
        answer = template.extract(completion)
        correct = answer == problem.answer
        return Verdict(float(correct), correct, answer, answer is not None)


def zoo_model_built(name: str) -> bool:
    """Whether zoo model `name` is built (shipped or cached), for tests that skip without it."""

    try:
        zoo_path(name)
    except ConfigError:
        return False
    return True


def cycle_script(completions: Sequence[str]) -> Callable[[str, int, int], str]:
    """A script giving sample j of every prompt `completions[j % len(completions)]`."""
    options = list(completions)
    return lambda _prompt, j, _call: options[j % len(options)]
