"""`per_study`: compute a function of one study's data once per report.

Several tables, the findings and the figures read the same contrasts, claims and curve fits;
each is computed on first use and kept for as long as that `StudyData` object lives (keyed by
identity: the frames in it are not hashable, and a `dataclasses.replace` copy is new data).
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from ablate.report.data.load import StudyData

R = TypeVar("R")
_MEMO: dict[int, dict[tuple, Any]] = {}


def per_study(fn: Callable[..., R]) -> Callable[..., R]:
    """`fn(data, *args)` computed once per (data object, args)."""

    @functools.wraps(fn)
    def once(data: StudyData, *args: Any) -> R:
        memo = _MEMO.get(id(data))
        if memo is None:
            memo = _MEMO[id(data)] = {}
            weakref.finalize(data, _MEMO.pop, id(data), None)
        key = (fn.__module__, fn.__qualname__, args)
        if key not in memo:
            memo[key] = fn(data, *args)
        return memo[key]

    return once
