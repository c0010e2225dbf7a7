"""How a trial is evaluated (`EvalSpec`: the held-out eval's problems, samples, k and cadence) and
which compute-performance curves its study reports (`CurveSpec`, on one of `COMPUTE_AXES`).
Frozen and keyword-only like `Algorithm`; part of `TrialSpec` and of its id."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ablate.factors.fields import Rule, listed_problems, record_problems

#: The metric pass@1 on the selection split (`EvalSpec.selection_problems`) is logged as: the
#: evaluation writes it, the report's best-checkpoint reading chooses a checkpoint by it.
SELECTION_METRIC = "selection/pass_at_1"


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
