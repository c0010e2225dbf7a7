"""Timing and summary helpers shared by every benchmark section.

On a shared, noisy machine a single timing means little: every figure is a median over repeats
with its min and max, and every comparison is a ratio of medians taken in one process with the
contenders interleaved (A B A B ...), so that background load hits both alike.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Summary:
    """Median, min and max of repeated measurements (`n` of them)."""

    median: float
    min: float
    max: float
    n: int


def summarize(values: Sequence[float]) -> Summary:
    """The median/min/max of `values`; ValueError when there are none (a silent 0 would hide a
    benchmark that measured nothing)."""
    if not values:
        raise ValueError("nothing was measured")
    return Summary(statistics.median(values), min(values), max(values), len(values))


def ratio_summary(numerator: Sequence[float], denominator: Sequence[float]) -> Summary:
    """A comparison of two interleaved series: median = ratio of the medians (robust to one slow
    repeat on either side), min/max = extremes of the per-pair ratios (how much it moved)."""
    if len(numerator) != len(denominator):
        raise ValueError(f"unpaired series: {len(numerator)} vs {len(denominator)} values")
    pairs = [a / b for a, b in zip(numerator, denominator, strict=True)]
    middle = summarize(numerator).median / summarize(denominator).median
    return Summary(middle, min(pairs), max(pairs), len(pairs))


@dataclass(frozen=True)
class Target:
    """A goal on a figure's median, e.g. Target("<=", 0.5)."""

    op: str
    value: float

    def __post_init__(self) -> None:
        if self.op not in ("<=", ">="):
            raise ValueError(f"target op must be '<=' or '>=', got {self.op!r}")

    def met(self, median: float) -> bool:
        return median <= self.value if self.op == "<=" else median >= self.value

    def __str__(self) -> str:
        return f"{'≤' if self.op == '<=' else '≥'} {self.value:g}"


@dataclass(frozen=True)
class Row:
    """One reported figure: a line of bench.csv and of a section's table in bench.md."""

    section: str
    case: str
    metric: str
    unit: str
    summary: Summary
    target: Target | None = None
    note: str = ""

    @property
    def meets_target(self) -> bool | None:
        return None if self.target is None else self.target.met(self.summary.median)


def rows_for(
    section: str, case: str, unit: str, series: Mapping[str, Sequence[float]]
) -> list[Row]:
    """One untargeted row per named series (e.g. {"ablate step": [...], "trl step": [...]})."""
    return [Row(section, case, name, unit, summarize(v)) for name, v in series.items()]


@dataclass
class Interleaved:
    """Seconds per runner (warm-up dropped) and the order the runs happened in."""

    seconds: dict[str, list[float]]
    order: list[str] = field(default_factory=list)
    results: dict[str, list[object]] = field(default_factory=dict)


def interleave(
    runners: Mapping[str, Callable[[], object]], repeats: int, warmup: int = 1
) -> Interleaved:
    """Run every runner once per round, round after round (A B A B ...); the first `warmup`
    rounds (allocator, lazy imports, caches) are run but not kept. What each kept run returns
    is kept too (e.g. a step's metrics), beside its wall time."""
    if repeats < 1 or warmup < 0:
        raise ValueError("repeats must be >= 1 and warmup >= 0")
    out = Interleaved({name: [] for name in runners}, results={name: [] for name in runners})
    for round_ in range(warmup + repeats):
        for name, run in runners.items():
            start = time.perf_counter()
            result = run()
            seconds = time.perf_counter() - start
            out.order.append(name)
            if round_ >= warmup:
                out.seconds[name].append(seconds)
                out.results[name].append(result)
    return out
