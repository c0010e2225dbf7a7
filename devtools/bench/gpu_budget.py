"""The budget of `make gpu-check`: parts run in order, each under a time cap derived from what is
left of the whole run's budget, each writing its result to `<out>/<part>.json` (and the summary
`<out>/gpu_check.md`, rewritten) as soon as it ends, so a run stopped from outside still leaves
every finished part on disk.

A part's cap is its share of the budget (at least its own minimum), at most what is left once the
later parts' minimums are set aside (or, when that is below its own minimum, everything that is
left); a part that cannot get its minimum is skipped, and says so. The cap is enforced by
SIGALRM (`time_cap`): the part is interrupted between Python bytecodes, its partial results kept
and its status "stopped at its cap". A single long C call (a kernel, a compile) delays the
interrupt until it returns; the Makefile's `timeout` is the backstop for that.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import signal
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

#: Seconds kept back from the last part for writing the reports.
RESERVE_S = 2.0


@dataclasses.dataclass
class Check:
    name: str
    passed: bool
    detail: str


@dataclasses.dataclass(frozen=True)
class Part:
    """One part of the check: `run(ctx, record, checks)` fills `record` (the part's results)
    and `checks` as it goes, so what it measured and checked survives a stop at its cap."""

    name: str
    summary: str
    share: float  # of the budget: its cap when the budget allows
    min_s: float  # skipped when less than this can be given
    run: Callable[[Any, dict, list[Check]], None]
    unavailable: str = ""  # why it cannot run on this machine ("" = it can)

    @property
    def file(self) -> str:
        return self.name.replace("-", "_") + ".json"


class PartTimeout(BaseException):
    """Raised in a part when its cap is reached (a BaseException: no `except Exception` in the
    code under test swallows it)."""


@contextlib.contextmanager
def time_cap(seconds: float) -> Iterator[None]:
    """Raise PartTimeout in the main thread after `seconds`."""

    def expire(signum, frame):
        raise PartTimeout

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.01))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclasses.dataclass
class Outcome:
    part: str
    summary: str
    status: str  # pending | passed | failed | error | stopped at its cap | skipped
    cap_s: float = 0.0
    seconds: float = 0.0
    note: str = ""
    checks: list[Check] = dataclasses.field(default_factory=list)
    results: dict = dataclasses.field(default_factory=dict)


class Clock:
    """The run's budget: seconds since `started` (time.monotonic) against `budget_s`."""

    def __init__(self, budget_s: float, started: float | None = None) -> None:
        self.budget_s = budget_s
        self.started = time.monotonic() if started is None else started

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def left(self) -> float:
        return self.budget_s - self.elapsed() - RESERVE_S


def cap_for(part: Part, later: list[Part], clock: Clock) -> float:
    """The seconds `part` may take now (below its `min_s`: it is skipped)."""
    left = clock.left()
    reserved = sum(p.min_s for p in later if not p.unavailable)
    want = max(part.share * clock.budget_s, part.min_s)
    if left - reserved >= part.min_s:
        return min(want, left - reserved)
    return min(want, left)


def run_part(part: Part, ctx: Any, cap: float) -> Outcome:
    """`part` under `cap` seconds; never raises (an error is the outcome's status)."""
    outcome = Outcome(part.name, part.summary, "error", cap_s=cap)
    start = time.monotonic()
    try:
        with time_cap(cap):
            part.run(ctx, outcome.results, outcome.checks)
        outcome.status = "passed" if all(c.passed for c in outcome.checks) else "failed"
    except PartTimeout:
        outcome.status = "stopped at its cap"
        outcome.note = f"stopped after {cap:.0f} s; the results so far are kept"
    except Exception as exc:  # a part's failure is reported, the next part still runs
        outcome.note = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        outcome.results["traceback"] = traceback.format_exc(limit=6)
    outcome.seconds = time.monotonic() - start
    return outcome


def run_parts(
    parts: list[Part], ctx: Any, clock: Clock, out: Path, header: list[str], say=print
) -> list[Outcome]:
    """Every part in order under the budget; each outcome written as it ends."""
    out.mkdir(parents=True, exist_ok=True)
    for part in parts:  # no stale result from an earlier run
        (out / part.file).unlink(missing_ok=True)
    outcomes = [Outcome(p.name, p.summary, "pending") for p in parts]
    write_summary(outcomes, header, clock, out)
    for k, part in enumerate(parts):
        cap = cap_for(part, parts[k + 1 :], clock)
        if part.unavailable:
            outcome = Outcome(part.name, part.summary, "skipped", note=part.unavailable)
        elif cap < part.min_s:
            note = (
                f"{max(cap, 0.0):.0f} s of the {clock.budget_s:.0f} s budget left to it; "
                f"it needs at least {part.min_s:.0f} s"
            )
            outcome = Outcome(part.name, part.summary, "skipped", note=note)
        else:
            outcome = run_part(part, ctx, cap)
        outcomes[k] = outcome
        write_part(outcome, out / part.file)
        write_summary(outcomes, header, clock, out)
        say(progress_line(outcome, clock, out / part.file))
    return outcomes


def progress_line(outcome: Outcome, clock: Clock, path: Path) -> str:
    stamp = f"[{clock.elapsed():4.0f} s] {outcome.part}:"
    if outcome.status == "skipped":
        return f"{stamp} skipped: {outcome.note}"
    lines = [f"{stamp} {outcome.status} in {outcome.seconds:.1f} s (cap {outcome.cap_s:.0f} s)"]
    lines[0] += f" -> {path}" + (f"; {outcome.note}" if outcome.note else "")
    lines += [f"    {'ok  ' if c.passed else 'FAIL'} {c.name}: {c.detail}" for c in outcome.checks]
    return "\n".join(lines)


def write_part(outcome: Outcome, path: Path) -> None:
    payload = dataclasses.asdict(outcome)
    path.write_text(json.dumps(payload, indent=1, default=str) + "\n", encoding="utf-8")


def write_summary(outcomes: list[Outcome], header: list[str], clock: Clock, out: Path) -> None:
    """gpu_check.md: the run's header, then each part's status, checks and results."""
    lines = ["# GPU check", "", *header, "", f"- elapsed: {clock.elapsed():.0f} s", ""]
    for o in outcomes:
        lines.append(f"## {o.part}: {o.status}" + (f" ({o.seconds:.1f} s)" if o.seconds else ""))
        lines += ["", o.summary + ".", ""]
        lines += [f"- note: {o.note}"] if o.note else []
        lines += [f"- {'✅' if c.passed else '❌'} {c.name}: {c.detail}" for c in o.checks]
        lines += [f"- {k}: {_brief(v)}" for k, v in o.results.items() if k != "traceback"]
        lines.append("")
    (out / "gpu_check.md").write_text("\n".join(lines), encoding="utf-8")


def _brief(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{k} {_brief(v)}" for k, v in value.items())
    if isinstance(value, list) and len(value) > 12:
        return f"{len(value)} values, first {_brief(value[:6])}"
    if isinstance(value, list):
        return "[" + ", ".join(_brief(v) for v in value) + "]"
    return str(value)


def tally(outcomes: list[Outcome]) -> str:
    """'2 passed, 1 stopped at its cap, 1 skipped' (statuses in order of first appearance)."""
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.status] = counts.get(o.status, 0) + 1
    return ", ".join(f"{n} {status}" for status, n in counts.items())
