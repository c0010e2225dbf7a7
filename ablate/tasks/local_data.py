"""Tasks read from local files with `datasets` (never the hub): GSM8K style and MATH style.

- `gsm8k`: rows with `question` and `answer`, the answer ending in `#### <number>`; an extracted
  answer is compared as an exact number (`1,234.0` equals `1234`).
- `math`: rows with `problem` and `solution`, the reference being the solution's last
  `\\boxed{}`; checked by normalised string equality first, then by math-verify in a worker
  process under the task's time limit (a timeout or a math-verify failure is a verifier error).

Files are `.jsonl` / `.json` / `.parquet`. Without `eval_path`, `n_eval` rows are held out by a
seeded shuffle; either way a question never appears in both splits.
"""

from __future__ import annotations

import os
import re
from abc import abstractmethod
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from typing import ClassVar

from ablate.base.errors import ConfigError
from ablate.base.seeding import rng as named_rng
from ablate.tasks.base import (
    TIMEOUT,
    Problem,
    Split,
    Task,
    Verdict,
    check_split,
    error_verdict,
    register_task,
    stable_id,
)
from ablate.tasks.math_check import (
    MathVerifyError,
    VerifierTimeout,
    normalize_math,
    shared_verifier,
)
from ablate.tasks.templates import Template, last_boxed

_FORMATS = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}
_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
MAX_NUMBER_CHARS = 40
MAX_MATH_ANSWER_CHARS = 500


def _check_file(task: str, option: str, path: str | os.PathLike) -> Path:
    file = Path(path).expanduser()
    if file.suffix not in _FORMATS:
        raise ConfigError(f"{task}: {option}={str(path)!r} must end in .jsonl, .json or .parquet")
    if not file.is_file():
        raise ConfigError(f"{task}: {option}={str(path)!r} does not exist; give a local file path")
    return file


def load_rows(file: Path, columns: tuple[str, ...], task: str) -> list[dict]:
    """The `columns` of every row of a local jsonl / parquet file, read offline."""
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    import datasets  # lazy: heavy, and only local-data tasks need it

    # datasets infers a json file's schema from its first rows and fails with a bare
    # StopIteration on a file that has none
    if not file.read_bytes().strip():
        raise ConfigError(f"{task}: {file} is empty; it needs rows with {list(columns)}")
    from datasets.utils import logging as ds_logging

    # a parse error is raised below as one line; datasets would also log it, with a bar
    verbosity = ds_logging.get_verbosity()
    ds_logging.set_verbosity(ds_logging.CRITICAL)
    ds_logging.disable_progress_bar()
    try:
        data = datasets.load_dataset(_FORMATS[file.suffix], data_files=str(file), split="train")
    except Exception as exc:
        raise ConfigError(f"{task}: cannot read {file}: {_root_cause(exc)}") from None
    finally:
        ds_logging.set_verbosity(verbosity)
    missing = [c for c in columns if c not in data.column_names]
    if missing:
        raise ConfigError(
            f"{task}: {file} lacks column(s) {missing}; it has {data.column_names}, "
            f"and a {task} file needs {list(columns)}"
        )
    return data.select_columns(list(columns)).to_list()


def _root_cause(exc: BaseException) -> str:
    """The innermost cause in one line: datasets wraps a parse error in a generic one."""
    while exc.__cause__ is not None or exc.__context__ is not None:
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:200] if lines else ''}".rstrip(": ")


def parse_number(text: str) -> Fraction | None:
    """`$1,234.50.` -> Fraction(2469, 2); None if not a plain (bounded) number."""
    cleaned = text.strip().replace(",", "").replace("$", "").rstrip(".").strip()
    if len(cleaned) > MAX_NUMBER_CHARS or not _NUMBER.fullmatch(cleaned):
        return None
    return Fraction(cleaned)


@dataclass(frozen=True, kw_only=True)
class LocalDatasetTask(Task):
    """Common loading and splitting; subclasses turn one row into a Problem."""

    columns: ClassVar[tuple[str, ...]]
    path: str
    """Local .jsonl / .json / .parquet file (the train split, or everything if no eval_path)."""
    eval_path: str | None = None
    """Local file of the eval split; if absent, n_eval rows of `path` are held out."""
    n_eval: int = 256
    seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_file(self.name, "path", self.path)
        if self.eval_path is not None:
            _check_file(self.name, "eval_path", self.eval_path)

    @abstractmethod
    def _to_problem(self, row: dict) -> Problem | None:
        """The Problem of one row, or None for a row without a usable reference answer."""

    def _problems_of(self, path: str) -> list[Problem]:
        rows = load_rows(_check_file(self.name, "path", path), self.columns, self.name)
        problems = [p for p in map(self._to_problem, rows) if p is not None]
        if not problems:
            raise ConfigError(f"{self.name}: {path} has no row with a usable answer")
        return problems

    @cached_property
    def _splits(self) -> dict[Split, list[Problem]]:
        train = self._problems_of(self.path)
        if self.eval_path is not None:
            eval_ = self._problems_of(self.eval_path)
        else:
            if not 0 < self.n_eval < len(train):
                raise ConfigError(
                    f"{self.name}: n_eval={self.n_eval} must be in 1..{len(train) - 1} for "
                    f"{len(train)} rows; lower n_eval or pass eval_path"
                )
            order = list(range(len(train)))
            named_rng(self.seed, self.name, "split").shuffle(order)
            held = set(order[: self.n_eval])
            eval_ = [p for i, p in enumerate(train) if i in held]
            train = [p for i, p in enumerate(train) if i not in held]
        in_eval = {p.question for p in eval_}
        return {"train": [p for p in train if p.question not in in_eval], "eval": eval_}

    def problems(self, split: Split) -> list[Problem]:
        return list(self._splits[check_split(self.name, split)])


@register_task
@dataclass(frozen=True, kw_only=True)
class GSM8KTask(LocalDatasetTask):
    """GSM8K style: reward 1 iff the extracted answer equals the `#### n` number exactly."""

    name: ClassVar[str] = "gsm8k"
    columns: ClassVar[tuple[str, ...]] = ("question", "answer")

    def _to_problem(self, row: dict) -> Problem | None:
        question, solution = str(row["question"]), str(row["answer"])
        if "####" not in solution:
            return None
        answer = solution.rsplit("####", 1)[1].strip().replace(",", "")
        data = {"solution": solution}
        return Problem(stable_id(self.name, question), question, answer, data)

    def _verify(self, problem: Problem, completion: str, template: Template) -> Verdict:
        answer = template.extract(completion)
        if answer is None:
            return Verdict(self.score(False, False), False, None, False)
        value, reference = parse_number(answer), parse_number(problem.answer)
        correct = answer.strip() == problem.answer if reference is None else value == reference
        return Verdict(self.score(correct, True), correct, answer[:200], True)


@register_task
@dataclass(frozen=True, kw_only=True)
class MathTask(LocalDatasetTask):
    """MATH style: reward 1 iff the extracted answer equals the solution's last `\\boxed{}`."""

    name: ClassVar[str] = "math"
    columns: ClassVar[tuple[str, ...]] = ("problem", "solution")

    def _to_problem(self, row: dict) -> Problem | None:
        question, solution = str(row["problem"]), str(row["solution"])
        answer = last_boxed(solution)
        if not answer:
            return None
        return Problem(stable_id(self.name, question), question, answer, {"solution": solution})

    def _prepare(self) -> None:
        shared_verifier().start()

    def _verify(self, problem: Problem, completion: str, template: Template) -> Verdict:
        start = self.clock()
        answer = template.extract(completion)
        if answer is None:
            return Verdict(self.score(False, False), False, None, False)
        if normalize_math(answer) == normalize_math(problem.answer):
            correct = True
        elif len(answer) > MAX_MATH_ANSWER_CHARS:
            correct = False  # far longer than any reference: wrong, without a sympy run
        else:
            remaining = self.time_limit - (self.clock() - start)
            try:
                correct = shared_verifier().equal(problem.answer, answer, remaining)
            except VerifierTimeout:
                return error_verdict(TIMEOUT)
            except MathVerifyError as exc:
                return error_verdict(f"math-verify: {exc}")
        return Verdict(self.score(correct, True), correct, answer[:200], True)
