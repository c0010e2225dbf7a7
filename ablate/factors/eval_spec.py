"""How a trial is evaluated (`EvalSpec`: the held-out eval's problems, samples, k and cadence) and
which compute-performance curves its study reports (`CurveSpec`, on one of `COMPUTE_AXES`).
Frozen and keyword-only like `Algorithm`; part of `TrialSpec` and of its id."""

from __future__ import annotations

from dataclasses import dataclass

from ablate.factors.fields import listed_problems, type_problems

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

    def problems(self) -> list[str]:
        if wrong := type_problems(self):
            return wrong
        return listed_problems(
            self,
            {
                f"every={self.every} must be >= 0": self.every >= 0,
                f"every_tokens={self.every_tokens} must be >= 0 (0 = off)": (
                    self.every_tokens >= 0
                ),
                f"every_flops={self.every_flops} must be >= 0 (0 = off)": self.every_flops >= 0,
                f"log_from={self.log_from} must be >= 0 (0 = off)": self.log_from >= 0,
                f"log_per_decade={self.log_per_decade} must be >= 1": self.log_per_decade >= 1,
                f"log_axis={self.log_axis!r} must be 'tokens' or 'flops'": (
                    self.log_axis in ("tokens", "flops")
                ),
                f"n_samples={self.n_samples} must be >= 1": self.n_samples >= 1,
                f"ks={self.ks} must be in 1..n_samples": (
                    bool(self.ks) and all(1 <= k <= self.n_samples for k in self.ks)
                ),
                f"max_problems={self.max_problems} must be None (all) or >= 1": (
                    self.max_problems is None or self.max_problems >= 1
                ),
                f"temperature={self.temperature} must be > 0": self.temperature > 0,
                f"selection_problems={self.selection_problems} must be >= 0 (0 = off)": (
                    self.selection_problems >= 0
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

    def problems(self) -> list[str]:
        if wrong := type_problems(self):
            return wrong
        target_ok = self.target is None or 0 < self.target < 1
        return listed_problems(
            self,
            {
                f"axis={self.axis!r} must be one of {sorted(COMPUTE_AXES)}": (
                    self.axis in COMPUTE_AXES
                ),
                f"warmup={self.warmup} must be >= 0": self.warmup >= 0,
                f"target={self.target} must be a pass@1 in (0, 1) or None": target_ok,
            },
        )
