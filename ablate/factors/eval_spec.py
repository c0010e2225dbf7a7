"""How a trial is evaluated (`EvalSpec`: the held-out eval's problems, samples, k and cadence) and
which compute-performance curves its study reports (`CurveSpec`, on one of `COMPUTE_AXES`).
Frozen and keyword-only like `Algorithm`; part of `TrialSpec` and of its id."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import ClassVar

from ablate.factors.fields import Rule, listed_problems, record_problems

#: The metric pass@1 on the selection split (`EvalSpec.selection_problems`) is logged as: the
#: evaluation writes it, the report's best-checkpoint reading chooses a checkpoint by it.
SELECTION_METRIC = "selection/pass_at_1"


@dataclass(frozen=True)
class Recipe:
    """One eval recipe: the prompt template, sampling temperature, token limit and decode seed
    (0 = the trial's own eval draws) a final checkpoint is evaluated under."""

    template: str
    temperature: float
    max_new_tokens: int
    decode_seed: int = 0

    @property
    def label(self) -> str:
        return (
            f"{self.template} · T={self.temperature:g} · {self.max_new_tokens} tok · "
            f"seed {self.decode_seed}"
        )


@dataclass(frozen=True, kw_only=True)
class Recipes:
    """Eval-recipe robustness: every final checkpoint re-evaluated (never retrained) under each
    combination of templates × temperatures × token limits × decode seeds; an empty tuple keeps
    the study's own value (its template, eval temperature, budget's max_new_tokens). The report
    gives each primary contrast's verdict under every recipe and whether it survives them all."""

    decode_seeds: int = 1
    """Eval sampling seeds per recipe (seed 0: the trial's own eval draws)."""
    templates: tuple[str, ...] = ()
    temperatures: tuple[float, ...] = ()
    max_new_tokens: tuple[int, ...] = ()

    RULES: ClassVar[dict[str, Rule]] = {
        "decode_seeds": Rule(low=1),
        "temperatures": Rule(above=0),
        "max_new_tokens": Rule(low=1),
    }

    def __post_init__(self) -> None:
        for name in ("templates", "temperatures", "max_new_tokens"):
            value = getattr(self, name)
            if isinstance(value, list | range):
                object.__setattr__(self, name, tuple(value))

    def problems(self) -> list[str]:
        return record_problems(self)

    def expand(self, template: str, temperature: float, max_new_tokens: int) -> list[Recipe]:
        """Every recipe, the study's own values where a tuple is empty, the study's own recipe
        (at decode seed 0) first."""
        grid = itertools.product(
            dict.fromkeys((template, *self.templates)) if self.templates else (template,),
            dict.fromkeys((temperature, *self.temperatures))
            if self.temperatures
            else (temperature,),
            dict.fromkeys((max_new_tokens, *self.max_new_tokens))
            if self.max_new_tokens
            else (max_new_tokens,),
            range(self.decode_seeds),
        )
        return [Recipe(*r) for r in grid]


@dataclass(frozen=True, kw_only=True)
class EvalSpec:
    """Held-out evaluation: every `every` steps, on a compute cadence (every `every_tokens`
    generated tokens, every `every_flops` model FLOPs, log-spaced from `log_from`), and at the
    end (at most once per step)."""

    every: int = 0
    """Evaluate every this many steps (0 = only at the start and the end)."""
    every_tokens: int = 0
    """Also evaluate in the step whose generated tokens cross a multiple of this (0 = off)."""
    every_flops: float = 0.0
    """Also evaluate in the step whose model FLOPs (`ablate.stages.compute`) cross a multiple of
    this (0 = off)."""
    log_from: float = 0.0
    """Also evaluate on a log-spaced compute cadence: in the step crossing log_from ×
    10^(k / log_per_decade), k = 0, 1, … (0 = off)."""
    log_per_decade: int = 4
    """Marks per decade of the log-spaced cadence."""
    log_axis: str = "tokens"
    """The compute the log-spaced cadence counts: "tokens" (generated) or "flops" (model)."""
    at_start: bool = True
    """Also evaluate the base model before step 1 (for gains)."""
    n_samples: int = 8
    """Samples per eval problem (pass@1 is their mean correctness)."""
    ks: tuple[int, ...] = (1, 8)
    """pass@k values reported."""
    max_problems: int | None = None
    """Eval problems used (the first ones of the eval split); None = the whole split, the
    report's task-level reading (below 256 problems the study warns)."""
    temperature: float = 1.0
    """Eval sampling temperature."""
    selection_problems: int = 0
    """Also evaluate on a selection split: the eval split's next this many problems after the
    first `max_problems` (never trained on, never in the headline), logged as
    selection/pass_at_1; the report's labelled best-checkpoint reading chooses each trial's
    checkpoint there, never on the eval problems (0 = off)."""
    robustness: Recipes | None = None
    """Re-evaluate every final checkpoint under these eval recipes (`Recipes`); not part of a
    trial's identity (adding it retrains nothing). None = off."""

    RULES: ClassVar[dict[str, Rule]] = {
        "every": Rule(low=0, note="0 = only at the start and the end"),
        "every_tokens": Rule(low=0, note="0 = off"),
        "every_flops": Rule(low=0, note="0 = off"),
        "log_from": Rule(low=0, note="0 = off"),
        "log_per_decade": Rule(low=1),
        "log_axis": Rule(choices=("tokens", "flops")),
        "n_samples": Rule(low=1),
        "ks": Rule(nonempty=True, low=1),
        "max_problems": Rule(low=1, note="None = the whole split"),
        "temperature": Rule(above=0),
        "selection_problems": Rule(low=0, note="0 = off"),
    }

    def problems(self) -> list[str]:
        if wrong := record_problems(self):
            return wrong
        return listed_problems(
            self,
            {
                f"ks={self.ks} must be in 1..n_samples={self.n_samples}": all(
                    k <= self.n_samples for k in self.ks
                ),
                "selection_problems needs max_problems (the selection split is the eval "
                "split's problems after the first max_problems)": (
                    not self.selection_problems or self.max_problems is not None
                ),
            },
        )


#: The compute axes a trial logs every step, by the name a `CurveSpec` uses -> metric.
COMPUTE_AXES = {
    "generated_tokens": "budget/generated_tokens",
    "trained_tokens": "budget/trained_tokens",
    "model_flops": "perf/model_flops",
    "wall_seconds": "budget/wall_seconds",
}


@dataclass(frozen=True, kw_only=True)
class CurveSpec:
    """Compute–performance curves in a study's report: ScaleRL's sigmoid fitted per arm and
    seed (`ablate.report.curves`). Declared with the study, before its results are seen."""

    axis: str = "generated_tokens"
    """The compute on the x axis: a key of `COMPUTE_AXES`."""
    warmup: float = 0.0
    """Evals at less compute than this are not fitted (ScaleRL fits after about one epoch)."""
    target: float | None = None
    """A pass@1 whose compute-to-reach the report gives with an interval (None = none)."""

    RULES: ClassVar[dict[str, Rule]] = {
        "axis": Rule(choices=tuple(COMPUTE_AXES)),
        "warmup": Rule(low=0),
        "target": Rule(above=0, below=1, note="a pass@1, or None"),
    }

    def problems(self) -> list[str]:
        return record_problems(self)
