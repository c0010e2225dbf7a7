"""A published paper's finding as data, declared by the study that tests it.

A `Finding` says what the paper found (in its words), what ablate tests in its place (arm minus
reference on one measure, in a predicted direction, or no effect within a margin), where (the
study, base model and template) and which training metric should explain it. A study lists the
findings it tests (`Study(findings=...)`); `ablate report` tests them on that study's results
(`ablate.report.claims.paper`), several studies' findings together as one reproduction.

Fields are checked when the record is made, each problem as a `StudyError` naming the field; the
study checks that the arms, base model and template exist in it (`study_checks`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ablate.base.errors import StudyError

_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_METRIC = re.compile(r"[a-z_]+/[A-Za-z0-9_@.]+")  # a logged metric: namespace/name


@dataclass(frozen=True, kw_only=True)
class Finding:
    id: str
    """A short name, unique within a reproduction (e.g. "std_easy")."""
    paper: str
    """The paper's finding, in its words (section / takeaway, and its number if it prints one)."""
    statement: str
    """What ablate tests: arm minus reference, on the measure, in the predicted direction."""
    study: str
    """The study whose results test it: the study that declares it."""
    model: str
    """The base model (rung) both arms are compared on."""
    arm: str
    reference: str
    """The arm compared against; the two should differ in the finding's factor only."""
    direction: int
    """+1 / -1: the sign the paper predicts for arm minus reference; 0: no effect (set margin)."""
    mechanism: str
    """The training metric (mean over steps, then seeds) that should explain the effect."""
    measure: str = "eval/pass_at_1"
    """An eval metric (final value; a diverged trial counts 0) or a training metric (mean over
    the last quarter of steps)."""
    template: str = "plain"
    margin: float | None = None
    """For a finding of no effect: supported when the whole 95% interval of the difference lies
    within ±margin (in the measure's units)."""

    def __post_init__(self) -> None:
        problems = _problems(self)
        if problems:
            label = self.id if isinstance(self.id, str) and self.id else "?"
            raise StudyError(f"finding {label!r}: " + "; ".join(problems))


def _problems(f: Finding) -> list[str]:
    out = []
    for name in ("id", "study", "model", "arm", "reference", "template"):
        value = getattr(f, name)
        if not (isinstance(value, str) and _NAME.fullmatch(value)):
            out.append(f"{name}={value!r} must be a non-empty name (letters, digits, '_.-')")
    for name in ("paper", "statement"):
        if not (isinstance(getattr(f, name), str) and getattr(f, name).strip()):
            out.append(f"{name} must say it in words, got {getattr(f, name)!r}")
    for name in ("measure", "mechanism"):
        value = getattr(f, name)
        if not (isinstance(value, str) and _METRIC.fullmatch(value)):
            out.append(f"{name}={value!r} must be a logged metric, namespace/name")
    if f.arm == f.reference:
        out.append(f"arm and reference are both {f.arm!r}: a finding compares two arms")
    if f.direction not in (-1, 0, 1) or isinstance(f.direction, bool):
        out.append(f"direction={f.direction!r} must be +1, -1 or 0 (no effect)")
    out += _margin_problems(f)
    return out


def _margin_problems(f: Finding) -> list[str]:
    if f.direction == 0:
        number = isinstance(f.margin, int | float) and not isinstance(f.margin, bool)
        ok = number and math.isfinite(f.margin) and f.margin > 0
        return [] if ok else [f"margin={f.margin!r}: a finding of no effect needs a margin > 0"]
    if f.margin is not None:
        return [f"margin={f.margin!r} applies only to a finding of no effect (direction=0)"]
    return []
