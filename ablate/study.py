"""Studies in Python: `Study(...)` names the base models, templates, arms, seeds and the shared
budget; `trials()` expands it into frozen `Trial`s with stable ids.

Arms are built lazily from (base, changes), so a study with several bad arms reports every
problem at once — as `StudyError`, before any compute or MLflow write.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ablate.algorithms import Algorithm
from ablate.errors import AblateError, StudyError
from ablate.trial import Budget, EvalSpec, Optim, TrialSpec

__all__ = [
    "Arm",
    "Budget",
    "Cells",
    "EvalSpec",
    "Optim",
    "PassKSpec",
    "SearchSpace",
    "Study",
    "Trial",
    "arm",
    "full_factorial",
    "load_study",
    "one_at_a_time",
    "path",
]


@dataclass(frozen=True, kw_only=True)
class Arm:
    """A named algorithm: a preset (or Algorithm) plus field changes, built when asked."""

    name: str
    base: str | Algorithm
    changes: tuple[tuple[str, Any], ...] = ()

    @property
    def algorithm(self) -> Algorithm:
        from ablate.presets import baseline

        base = baseline(self.base) if isinstance(self.base, str) else self.base
        try:
            return dataclasses.replace(base, **dict(self.changes))
        except TypeError as exc:  # an unknown field name
            raise StudyError(f"arm {self.name!r}: {exc}") from None


def arm(name: str, base: str | Algorithm, **changes: Any) -> Arm:
    """An explicit named arm, e.g. `arm("dapo_no_ds", "dapo", dynamic_sampling=False)`."""
    return Arm(name=name, base=base, changes=tuple(changes.items()))


def _label(base: str | Algorithm) -> str:
    return base if isinstance(base, str) else "custom"


def _fmt(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def one_at_a_time(base: str | Algorithm, **fields: Sequence[Any]) -> list[Arm]:
    """The base arm plus one arm per (field, value): single-factor ablations."""
    arms = [Arm(name=_label(base), base=base)]
    for name, values in fields.items():
        for value in values:
            arms.append(
                Arm(
                    name=f"{_label(base)}[{name}={_fmt(value)}]",
                    base=base,
                    changes=((name, value),),
                )
            )
    return arms


def full_factorial(base: str | Algorithm, **fields: Sequence[Any]) -> list[Arm]:
    """Every combination of the given field values."""
    names = list(fields)
    arms = []
    for combo in itertools.product(*(fields[n] for n in names)):
        label = ",".join(f"{n}={_fmt(v)}" for n, v in zip(names, combo, strict=True))
        arms.append(
            Arm(
                name=f"{_label(base)}[{label}]",
                base=base,
                changes=tuple(zip(names, combo, strict=True)),
            )
        )
    return arms


def path(from_preset: str, to_preset: str, order: Sequence[str] | None = None) -> list[Arm]:
    """From one preset to another, adding one differing field at a time (the DAPO paper's
    progressive table). `order` must name exactly the differing fields; default: field order."""
    from ablate.presets import baseline

    start, end = baseline(from_preset), baseline(to_preset)
    diff = start.diff(end)
    order = list(order) if order is not None else list(diff)
    if sorted(order) != sorted(diff):
        raise StudyError(
            f"path({from_preset!r} -> {to_preset!r}): order must list exactly the differing "
            f"fields {sorted(diff)}, got {order}"
        )
    arms, changes = [Arm(name=from_preset, base=from_preset)], []
    for name in order:
        changes.append((name, diff[name][1]))
        label = (
            to_preset
            if len(changes) == len(order)
            else f"{from_preset}+" + "+".join(n for n, _ in changes)
        )
        arms.append(Arm(name=label, base=from_preset, changes=tuple(changes)))
    return arms


@dataclass(frozen=True, kw_only=True)
class Cells:
    """An extra sub-grid beyond the study's full product; None means the study's own list."""

    arms: Sequence[str] | None = None
    base_models: Sequence[str] | None = None
    templates: Sequence[str] | None = None
    seeds: Sequence[int] | None = None


@dataclass(frozen=True, kw_only=True)
class PassKSpec:
    """The Pass@G phase: every base model × template before any RL."""

    n: int = 16
    ks: tuple[int, ...] = (1, 4, 8, 16)
    max_problems: int = 64
    templates: Sequence[str] | None = None
    temperature: float = 1.0


@dataclass(frozen=True, kw_only=True)
class SearchSpace:
    """A dimension for `ablate tune`: log-uniform floats or a categorical choice."""

    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: Sequence[Any] | None = None
    target: str = "algorithm"  # "algorithm" field or "optim" setting


@dataclass(frozen=True)
class Trial:
    """One expanded trial: the arm it belongs to and its frozen spec."""

    arm: str
    spec: TrialSpec

    @property
    def id(self) -> str:
        return self.spec.id


@dataclass(frozen=True, kw_only=True)
class Study:
    """A grid of trials sharing one task, budget, optimiser and evaluation."""

    name: str
    base_models: Sequence[str]
    arms: Sequence[Arm]
    templates: Sequence[str] = ("plain",)
    seeds: Sequence[int] = (0,)
    task: str = "arithmetic"
    task_options: Mapping[str, Any] = field(default_factory=dict)
    budget: Budget = field(default_factory=Budget)
    eval: EvalSpec = field(default_factory=EvalSpec)
    optim: Optim = field(default_factory=Optim)
    passk: PassKSpec | None = field(default_factory=PassKSpec)
    reference: str | None = None
    extra: Sequence[Cells] = ()
    search: Mapping[str, SearchSpace] = field(default_factory=dict)
    checkpoint_every: int = 25
    engine: str = "hf"
    device: str = "cpu"

    def __post_init__(self) -> None:
        for name in ("base_models", "arms", "templates", "seeds", "extra"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        # grid builders each start from their base arm: identical arms collapse into one
        object.__setattr__(self, "arms", tuple(dict.fromkeys(self.arms)))
        from ablate.study_checks import study_problems

        problems = study_problems(self)
        if problems:
            raise StudyError(
                f"study {self.name!r} has {len(problems)} problem(s):\n  - "
                + "\n  - ".join(problems)
            )

    @property
    def reference_arm(self) -> str:
        return self.reference or self.arms[0].name

    def arm(self, name: str) -> Arm:
        return next(a for a in self.arms if a.name == name)

    def cells(self) -> list[tuple[str, str, str, int]]:
        """(arm, base model, template, seed) in a stable order, without duplicates."""
        grids = [Cells(), *self.extra]
        out: dict[tuple, None] = {}
        for g in grids:
            for cell in itertools.product(
                g.arms or [a.name for a in self.arms],
                g.base_models or self.base_models,
                g.templates or self.templates,
                g.seeds if g.seeds is not None else self.seeds,
            ):
                out[cell] = None
        return list(out)

    def trials(self) -> list[Trial]:
        algos = {a.name: a.algorithm for a in self.arms}
        return [
            Trial(
                arm_name,
                TrialSpec(
                    algorithm=algos[arm_name],
                    model=model,
                    task=self.task,
                    task_options=tuple(sorted(self.task_options.items())),
                    template=template,
                    seed=seed,
                    budget=self.budget,
                    optim=self.optim,
                    eval=self.eval,
                    checkpoint_every=self.checkpoint_every,
                    study=self.name,
                    engine=self.engine,
                    device=self.device,
                ),
            )
            for arm_name, model, template, seed in self.cells()
        ]


def load_study(path_or_module: str | Path) -> Study:
    """Import a study file (or `studies.x` module) and return its `STUDY`."""
    text = str(path_or_module)
    file = Path(text)
    if not file.suffix and not file.exists():
        file = Path(*text.split(".")).with_suffix(".py")
    if not file.is_file():
        raise StudyError(f"no study file {text!r}")
    module_name = "ablate_study_" + re.sub(r"\W", "_", file.stem)
    spec = importlib.util.spec_from_file_location(module_name, file)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    except AblateError as exc:
        raise StudyError(f"{file}: {exc}") from None
    study = getattr(module, "STUDY", None)
    if not isinstance(study, Study):
        raise StudyError(f"{file} must define STUDY = Study(...)")
    return study
