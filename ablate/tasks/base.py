"""`Task`: a set of problems with stable ids and a time-limited verifier that never raises.

A verifier outcome is one of: correct, wrong (the model's fault: reward 0, `error` None), or a
verifier error / timeout (our fault or an input we could not judge in time: reward 0 and `error`
set). Errors are never folded silently into a wrong answer: training counts them as
`budget/verifier_errors` and evaluation as `eval/verifier_errors`.

How the time limit holds: every parser here is bounded by construction (length, depth and digit
caps before any arithmetic; extraction by linear scans), and math-verify, the one step that can
run away (sympy on `9**9**9**9`), runs in a worker process that is killed at the deadline.
`verify` also measures its own time and reports an overrun as `error="timeout"`. No signal
handler is used, so verification works from any thread.

The limit is on CPU time (the calling thread's, and the math worker's own), never wall time: on a
busy machine a wall-clock limit turned correct answers into timeouts (MATH's `0.75` against
`3/4` under a load of 8-15), so a reward depended on how busy the machine was.
"""

from __future__ import annotations

import hashlib
import random
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import ClassVar, Literal

from ablate.base.errors import ConfigError
from ablate.base.registry import Registry
from ablate.tasks.templates import Template, parsed

Split = Literal["train", "eval"]
SPLITS: tuple[Split, ...] = ("train", "eval")
TIMEOUT = "timeout"

# Every character a synthetic task or a template can emit: printable ASCII and the newline. The
# tiny char tokenizer is built from this fixed string, so adding a template never changes its
# vocabulary (and so never invalidates a cached zoo model).
CHARSET = "\n" + "".join(chr(c) for c in range(32, 127))


def synthetic_charset() -> str:
    """The characters synthetic tasks and templates can produce (see `CHARSET`)."""
    return CHARSET


def stable_id(task_name: str, content: str) -> str:
    """`<task>-<10 hex>`: the same content gives the same id on every machine and seed."""
    return f"{task_name}-{hashlib.sha256(content.encode()).hexdigest()[:10]}"


@dataclass(frozen=True)
class Problem:
    """One problem: `question` is bare text; a `Template` renders it into a prompt."""

    id: str
    question: str
    answer: str
    data: Mapping = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Verdict:
    """The outcome of verifying one completion.

    `self_check`: whether the completion contains the task's optional self-check (None where a
    task defines none). `mismatch`: whether a check's result differs from the main result (None
    where there is no check to compare)."""

    reward: float
    correct: bool
    answer: str | None
    format_ok: bool
    error: str | None = None
    self_check: bool | None = None
    mismatch: bool | None = None


def error_verdict(message: str) -> Verdict:
    """A verifier error: zero reward, counted as an error, never as a plain wrong answer."""
    return Verdict(reward=0.0, correct=False, answer=None, format_ok=False, error=message[:300])


@dataclass(frozen=True, kw_only=True)
class Task(ABC):
    """Problems plus a verifier. Subclasses are frozen dataclasses whose fields are the options
    `get_task` accepts; `__post_init__` validates them with fix-it messages."""

    name: ClassVar[str]
    clock: ClassVar[Callable[[], float]] = staticmethod(time.thread_time)
    """What `verify` times itself with: the calling thread's CPU time, which a busy machine does
    not stretch (a test gives a clock it advances)."""
    time_limit: float = 1.0
    """CPU seconds one `verify` call may take; an overrun is reported as error='timeout'."""
    reward_format: float = 0.0
    """Extra reward for a completion in the template's answer format (0 = correctness only)."""

    def __post_init__(self) -> None:
        if not self.time_limit > 0:
            raise ConfigError(f"{self.name}: time_limit must be > 0 seconds, got {self.time_limit}")
        if not 0.0 <= self.reward_format <= 1.0:
            raise ConfigError(
                f"{self.name}: reward_format must be in [0, 1], got {self.reward_format}"
            )

    @abstractmethod
    def problems(self, split: Split) -> list[Problem]:
        """The problems of `split` ('train' or 'eval'); the two splits share no problem."""

    @abstractmethod
    def _verify(self, problem: Problem, completion: str, template: Template) -> Verdict:
        """Judge one completion; may raise (the public `verify` turns that into an error)."""

    def _prepare(self) -> None:  # noqa: B027  (an optional hook, empty by default)
        """Set-up that must not count against the time limit (e.g. starting a worker)."""

    def verify(
        self, problem: Problem, completion: str, template: Template, parse: str = "strict"
    ) -> Verdict:
        """Judge `completion` for `problem` under `template`, its answer read with `parse`
        (`ablate.tasks.templates.PARSES`: "strict" or "lenient"). Never raises; time-limited."""
        template = parsed(template, parse)  # an unknown parse is a ConfigError, not a verdict
        try:
            self._prepare()
        except Exception as exc:
            return error_verdict(f"verifier setup failed: {type(exc).__name__}: {exc}")
        start = self.clock()
        try:
            verdict = self._verify(problem, str(completion), template)
        except Exception as exc:
            return error_verdict(f"{type(exc).__name__}: {exc}")
        if self.clock() - start > self.time_limit:
            return error_verdict(TIMEOUT)
        return verdict

    def score(self, correct: bool, format_ok: bool) -> float:
        """1/0 correctness, plus `reward_format` for a well-formatted answer if enabled."""
        return float(correct) + (self.reward_format if format_ok else 0.0)

    def sample_solution(self, problem: Problem, template: Template, rng: random.Random) -> str:
        """A worked-solution completion for `problem` (synthetic tasks only)."""
        raise ConfigError(
            f"task {self.name!r} has no generated worked solutions; "
            "pretraining corpora come from synthetic tasks such as 'arithmetic' or 'countdown'"
        )


def check_split(task: str, split: str) -> Split:
    if split not in SPLITS:
        raise ConfigError(f"{task}: unknown split {split!r}; valid: 'train', 'eval'")
    return split  # type: ignore[return-value]


def check_choice(task: str, option: str, value: object, valid: Iterable[object]) -> None:
    valid = tuple(valid)
    if value not in valid:
        raise ConfigError(
            f"{task}: unknown {option} {value!r}; valid: {', '.join(map(repr, valid))}"
        )


def completion_lead(template: Template, question: str) -> str:
    """A space after a prompt that ends in a non-space (`Answer:`), nothing otherwise."""
    prompt = template.render(question)
    return " " if prompt and not prompt[-1].isspace() else ""


TASKS: Registry[Callable[..., Task]] = Registry("task")


def register_task(cls: type[Task]) -> type[Task]:
    """Class decorator: make `cls` available to `get_task(cls.name, ...)`."""
    TASKS.register(cls.name)(cls)
    return cls


def task_names() -> tuple[str, ...]:
    return TASKS.names()


def get_task(name: str, **options: object) -> Task:
    """Build task `name` with `options` (its dataclass fields); unknown names / options and bad
    values raise ConfigError naming the valid ones."""
    cls = TASKS.get(name)
    valid = sorted(f.name for f in fields(cls) if f.init)
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ConfigError(
            f"unknown option(s) {', '.join(map(repr, unknown))} for task {name!r}; "
            f"valid: {', '.join(valid)}"
        )
    try:
        return cls(**options)
    except TypeError as exc:  # a required option is missing
        raise ConfigError(f"task {name!r}: {exc}") from None
