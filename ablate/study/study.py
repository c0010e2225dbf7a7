"""Studies in Python: `Study(...)` names the base models, templates, arms (`ablate.study.arms`),
seeds and the shared budget; `trials()` expands it into frozen `Trial`s with stable ids. A study
file imports everything it needs from here (`from ablate.study import Budget, Study, arm, ...`).

Arms are built lazily from (base, changes), so a study with several bad arms reports every
problem at once — as `StudyError`, before any compute or results-store write.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import re
import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ablate.base.errors import AblateError, StudyError, StudyWarning, keyword_hint
from ablate.factors.eval_spec import CurveSpec, EvalSpec, Recipes
from ablate.factors.fields import shown
from ablate.factors.finding import Finding
from ablate.factors.spec import Budget, Engine, Optim, TrialSpec
from ablate.launch.options import Launch
from ablate.launch.slurm_options import SlurmOptions
from ablate.study.arms import Arm, arm, full_factorial, one_at_a_time, path
from ablate.study.checks import study_problems, study_warnings
from ablate.study.controls import Control, normalized
from ablate.study.passk_spec import ElicitSpec, PassKSpec
from ablate.study.tuning import TuneSpec, linear_range, log_range, retuned

__all__ = [
    "Arm",
    "Budget",
    "Cells",
    "Control",
    "CurveSpec",
    "ElicitSpec",
    "EvalSpec",
    "Launch",
    "Optim",
    "PassKSpec",
    "Recipes",
    "SearchSpace",
    "SlurmOptions",
    "Study",
    "Trial",
    "TuneSpec",
    "arm",
    "full_factorial",
    "linear_range",
    "load_study",
    "log_range",
    "one_at_a_time",
    "path",
]


@dataclass(frozen=True, kw_only=True)
class Cells:
    """An extra sub-grid beyond the study's full product; None means the study's own list."""

    arms: Sequence[str] | None = None
    base_models: Sequence[str] | None = None
    templates: Sequence[str] | None = None
    seeds: Sequence[int] | None = None


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
    engine: Engine = "hf"
    """The trials' rollout engine, "hf" or "vllm" (an arm may set its own: `arm(engine=...)`)."""
    device: str = "cpu"
    precision: str = "fp32"
    """The trials' precision: "fp32" or "bf16" (autocast on a GPU); `ablate.base.devices`."""
    effect_of_interest: float | None = None
    """The smallest Δ pass@1 worth detecting: the report's power and `ablate plan` aim at it."""
    equivalence_margin: float | None = None
    """±margin on Δ pass@1 inside which two arms count as equivalent (TOST: the 90% task-level
    interval inside the margin); None = `effect_of_interest`. Declared before the results."""
    primary: str = "equal steps"
    """The primary comparison ("equal steps" or "equal tokens"); every other table is secondary."""
    looks: Sequence[int] = ()
    """A sequential design: the seed counts at which `ablate run --until-decided` looks (e.g.
    (3, 5, 8, 12, 16), the first `looks[-1]` of `seeds`), adding seeds only to the contrasts still
    undecided; () = a fixed design at every seed."""
    spending: str = "obrien_fleming"
    """Alpha spending across `looks` (Lan–DeMets): "obrien_fleming" or "pocock"."""
    positive_control: str | Control | None = None
    """An arm with a known, real effect against the reference (e.g. the reference trained on random
    rewards): the report says whether the study could detect it. Not in the primary family. Its
    name, or `Control(arm=..., effect=...)` with the Δ pass@1 it is expected to show; read back
    as the name (the effect goes to `control_effects`)."""
    graded_control: str | Control | None = None
    """A control with a declared, smaller effect (e.g. a share of the rewards randomised:
    reward_control="noisy"): `Control(arm=..., effect=...)`. `ablate plan` states its detection
    probability in advance; the report whether it was detected. Not in the primary family."""
    control_effects: Mapping[str, float] = field(default_factory=dict)
    """The controls' declared effects by arm, filled from their `Control` records."""
    curves: CurveSpec | None = None
    """Fit compute–performance curves in the report (set `eval`'s compute cadence with it)."""
    findings: Sequence[Finding] = ()
    """A paper's findings this study tests (`ablate report` tests them on its results)."""
    tune: TuneSpec | None = None
    """Tune every arm at an equal budget on a selection split before its trials (`TuneSpec`);
    None = every arm at the study's shared setting."""
    launch: Launch | None = None
    """Where `ablate run` trains the trials unless its options say otherwise: None = locally;
    `Launch(launcher="slurm", options=SlurmOptions(...))` = one Slurm job array."""

    def __post_init__(self) -> None:
        for name in ("base_models", "arms", "templates", "seeds", "extra", "findings", "looks"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "arms", _with_replicates_resolved(_collapsed(self.arms)))
        positive, graded, effects = normalized(
            self.positive_control, self.graded_control, self.control_effects
        )
        object.__setattr__(self, "positive_control", positive)
        object.__setattr__(self, "graded_control", graded)
        object.__setattr__(self, "control_effects", effects)
        problems = study_problems(self)
        if len(problems) == 1:
            raise StudyError(f"study {shown(self.name)}: {problems[0]}")
        if problems:
            raise StudyError(
                f"study {shown(self.name)} has {len(problems)} problem(s):\n  - "
                + "\n  - ".join(problems)
            )
        for message in study_warnings(self):
            warnings.warn(message, StudyWarning, stacklevel=3)

    @property
    def reference_arm(self) -> str:
        return self.reference or self.arms[0].name

    def arm(self, name: str) -> Arm:
        return next(a for a in self.arms if a.name == name)

    @property
    def engines(self) -> frozenset[str]:
        """The rollout engines its trials sample with: the study's, and any an arm sets."""
        return frozenset(a.engine or self.engine for a in self.arms)

    @property
    def compared_arms(self) -> tuple[Arm, ...]:
        """Arms contrasted with the reference (A/A replicates and the controls are checked on
        their own)."""
        controls = (self.positive_control, self.graded_control)
        return tuple(a for a in self.arms if a.replicate_of is None and a.name not in controls)

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

    def trials(self, chosen: Mapping[str, Mapping[str, Any]] | None = None) -> list[Trial]:
        """The expanded trials; `chosen`: arm -> its tuned values (`ablate.study.tune_phase`),
        applied to its trials (an arm not in it keeps the study's setting)."""
        return retuned(self._trials(), chosen or {})

    def _trials(self) -> list[Trial]:
        algos = {a.name: a.algorithm for a in self.arms}
        engines = {a.name: a.engine or self.engine for a in self.arms}
        replicates = {a.name for a in self.arms if a.replicate_of}
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
                    eval=dataclasses.replace(self.eval, robustness=None),  # not identity
                    checkpoint_every=self.checkpoint_every,
                    study=self.name,
                    engine=engines[arm_name],
                    device=self.device,
                    precision=self.precision,
                    replicate=arm_name if arm_name in replicates else "",
                ),
            )
            for arm_name, model, template, seed in self.cells()
        ]


def _collapsed(arms: tuple[Arm, ...]) -> tuple[Arm, ...]:
    """Equal arms collapse into one when a grid builder made all but one of them; equal arms
    written by hand stay, for the duplicate-name check to report."""
    out: list[Arm] = []
    for a in arms:
        twin = next((i for i, b in enumerate(out) if b == a), None)
        if twin is None or not (a.generated or out[twin].generated):
            out.append(a)
        elif out[twin].generated:
            out[twin] = a  # the hand-written one stands for both
    return tuple(out)


def _with_replicates_resolved(arms: tuple[Arm, ...]) -> tuple[Arm, ...]:
    """A replicate given without a base takes its original's base and changes."""
    by_name = {a.name: a for a in arms}
    out = []
    for a in arms:
        original = by_name.get(a.replicate_of) if a.replicate_of else None
        if original is not None and a.base is None and original.base is not None:
            a = Arm(
                name=a.name,
                base=original.base,
                changes=original.changes,
                replicate_of=original.name,
                engine=a.engine or original.engine,
            )
        out.append(a)
    return tuple(out)


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
    # a study file may import the files beside it (shared arms): `from tricks_or_traps import …`
    sys.path.insert(0, str(file.resolve().parent))
    try:
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    except AblateError as exc:
        raise StudyError(f"{_located(file, exc)}: {exc}") from None
    except Exception as exc:  # a typo in the study file: its line, not a traceback into ablate
        detail = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        message = " ".join(detail.split()) + keyword_hint(vars(module), exc)
        raise StudyError(f"{_located(file, exc)}: {type(exc).__name__}: {message}") from None
    finally:
        sys.path.remove(str(file.resolve().parent))
    study = getattr(module, "STUDY", None)
    if not isinstance(study, Study):
        raise StudyError(f"{file} must define STUDY = Study(...)")
    return study


def _located(file: Path, exc: BaseException) -> str:
    """`file:line`, the line being the study file's own (the last of its frames the exception
    passed through), not the library frame that raised; just `file` when it has no such frame."""
    if isinstance(exc, SyntaxError) and _same_file(exc.filename, file):
        return f"{file}:{exc.lineno}"
    line, tb = None, exc.__traceback__
    while tb is not None:
        if _same_file(tb.tb_frame.f_code.co_filename, file):
            line = tb.tb_lineno
        tb = tb.tb_next
    return f"{file}:{line}" if line is not None else str(file)


def _same_file(name: str | None, file: Path) -> bool:
    return name is not None and Path(name).resolve() == file.resolve()
