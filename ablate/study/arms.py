"""The arms of a study: a named algorithm (`Arm`: a preset or `Algorithm` plus field changes,
built when asked) and the grid builders that generate many at once (`one_at_a_time`,
`full_factorial`, `path`)."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ablate.base.errors import ConfigError, StudyError, did_you_mean
from ablate.baselines import baseline
from ablate.factors.algorithms import RENAMED, Algorithm, renamed_field


@dataclass(frozen=True, kw_only=True)
class Arm:
    """A named algorithm: a preset (or Algorithm) plus field changes, built when asked."""

    name: str
    base: str | Algorithm | None
    changes: tuple[tuple[str, Any], ...] = ()
    replicate_of: str | None = None
    """An A/A replicate of the named arm: the same algorithm on its own independent seed stream
    (never paired with the original by common random numbers); the report's live calibration
    check."""
    engine: str | None = None
    """The rollout engine of this arm's trials ("hf" or "vllm") when not the study's: an
    engine A/A (one algorithm on both engines) or the real engine as an off-policy mismatch."""
    generated: bool = field(default=False, compare=False, repr=False)
    """Made by a grid builder (`one_at_a_time`, `full_factorial`, `path`). Builders each start
    from their base arm, so a generated arm equal to another collapses into it; two equal arms
    the user wrote by hand are a duplicate name."""

    @property
    def declared(self) -> frozenset[str]:
        """The fields this arm sets explicitly (not inherited from its preset)."""
        return frozenset(name for name, _ in self.changes)

    @property
    def algorithm(self) -> Algorithm:
        if self.base is None:
            raise StudyError(f"arm {self.name!r} needs a preset or Algorithm (or replicate_of=)")
        base = baseline(self.base) if isinstance(self.base, str) else self.base
        try:
            return dataclasses.replace(base, **dict(self.changes))
        except TypeError as exc:  # an unknown field name
            raise StudyError(f"arm {self.name!r}: {exc}") from None


def arm(
    name: str,
    base: str | Algorithm | None = None,
    /,
    *,
    replicate_of: str | None = None,
    engine: str | None = None,
    **changes: Any,
) -> Arm:
    """An explicit named arm, e.g. `arm("dapo_no_ds", "dapo", dynamic_sampling=False)`.

    `arm("grpo_again", replicate_of="grpo")` is an A/A replicate: the algorithm of arm "grpo"
    on an independent seed stream; a base given with it must build the same algorithm.
    `arm("grpo_vllm", "grpo", engine="vllm")` samples its trials with another rollout engine
    than the study's (`Study.engine`), on the same seeds."""
    check_field_names(f"arm {name!r}", changes)
    if engine not in (None, "hf", "vllm"):
        raise StudyError(f"arm {name!r}: engine={engine!r} must be 'hf' or 'vllm'")
    return Arm(
        name=name,
        base=base,
        changes=tuple(changes.items()),
        replicate_of=replicate_of,
        engine=engine,
    )


def check_field_names(where: str, names: dict[str, Any]) -> None:
    """Refuse a name that is no `Algorithm` field where the arm is written (its study file's
    line, before any compute), with the closest field: Python's own "unexpected keyword
    argument" would surface only when the arm is built, naming no file line and no fix."""
    known = [f.name for f in dataclasses.fields(Algorithm)]
    for name in names:
        if name in RENAMED:  # a field that was renamed: its new spelling, as Algorithm says it
            raise ConfigError(f"{where}: {renamed_field(name, names[name])}")
        if name not in known:
            raise StudyError(
                f"{where}: {name!r} is not a factor{did_you_mean(name, known)}; "
                "`ablate show grpo` lists the fields"
            )


def _label(base: str | Algorithm, name: str | None = None, keyword: str = "base_name") -> str:
    """A base's arm name: its own, or the preset's; an Algorithm object has none to offer."""
    if name is not None:
        return name
    if not isinstance(base, str):
        raise StudyError(f"an Algorithm base needs {keyword}=, the name its arms carry in reports")
    return base


def _fmt(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def one_at_a_time(
    base: str | Algorithm, *, base_name: str | None = None, **fields: Sequence[Any]
) -> list[Arm]:
    """The base arm plus one arm per (field, value): single-factor ablations. `base_name`
    names the base (default: the preset's name; required for an Algorithm)."""
    label = _label(base, base_name)
    check_field_names(f"one_at_a_time({label!r})", fields)
    arms = [Arm(name=label, base=base, generated=True)]
    for name, values in fields.items():
        for value in values:
            changes = ((name, value),)
            arms.append(
                Arm(
                    name=f"{label}[{name}={_fmt(value)}]",
                    base=base,
                    changes=changes,
                    generated=True,
                )
            )
    return arms


def full_factorial(
    base: str | Algorithm, *, base_name: str | None = None, **fields: Sequence[Any]
) -> list[Arm]:
    """Every combination of the given field values."""
    check_field_names(f"full_factorial({_label(base, base_name)!r})", fields)
    names = list(fields)
    arms = []
    for combo in itertools.product(*(fields[n] for n in names)):
        label = ",".join(f"{n}={_fmt(v)}" for n, v in zip(names, combo, strict=True))
        arms.append(
            Arm(
                name=f"{_label(base, base_name)}[{label}]",
                base=base,
                changes=tuple(zip(names, combo, strict=True)),
                generated=True,
            )
        )
    return arms


def path(
    start: str | Algorithm,
    end: str | Algorithm,
    order: Sequence[str] | None = None,
    *,
    start_name: str | None = None,
    end_name: str | None = None,
) -> list[Arm]:
    """From one algorithm to another, adding one differing field at a time (the DAPO paper's
    progressive table). `order` must name exactly the differing fields; default: field order.

    Start from a schedule-matched base (e.g. `dataclasses.replace(grpo, minibatches=4)` to
    `dataclasses.replace(dapo, minibatches=4)`): a path from a 1-update preset leaves the clip
    inert until its last step and credits that step with every off-policy effect. Algorithms
    need names (`start_name`, `end_name`); presets are named after themselves."""
    first, last = _label(start, start_name, "start_name"), _label(end, end_name, "end_name")
    a = baseline(start) if isinstance(start, str) else start
    b = baseline(end) if isinstance(end, str) else end
    diff = a.diff(b)
    order = list(order) if order is not None else list(diff)
    if sorted(order) != sorted(diff):
        raise StudyError(
            f"path({first!r} -> {last!r}): order must list exactly the differing "
            f"fields {sorted(diff)}, got {order}"
        )
    arms, changes = [Arm(name=first, base=start, generated=True)], []
    for name in order:
        changes.append((name, diff[name][1]))
        label = (
            last if len(changes) == len(order) else f"{first}+" + "+".join(n for n, _ in changes)
        )
        arms.append(Arm(name=label, base=start, changes=tuple(changes), generated=True))
    return arms
