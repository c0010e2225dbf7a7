"""One ablate RL step as the benchmarks time it: `rl_step` on a fixed-length rollout engine, then
`tracker.log_metrics` into a real MLflow run (the harness's own cost is part of a step).

Every completion is forced to exactly `max_new_tokens` tokens (EOS and stop strings ignored), so
the work per step does not depend on what the weights happen to generate, and it matches a TRL
step with `min_new_tokens = max_new_tokens`. A `natural` case instead samples as a study does:
completions end at EOS (or a stop string), up to `max_new_tokens`, on the engine trials use.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ablate.base.records import Rollouts, SamplingParams

#: One learning rate for both tools (ablate's default; TRL gets the same, constant).
LR = 3e-5


class LengthError(RuntimeError):
    """A benchmark rollout was not exactly the length it must be: the comparison is void."""


class FixedLengthEngine:
    """An engine wrapper that samples exactly `max_new_tokens` tokens per completion."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def generate(self, prompts, n: int, sampling: SamplingParams, *, problem_ids=None) -> Rollouts:
        fixed = dataclasses.replace(sampling, ignore_eos=True, stop=())
        rollouts = self.inner.generate(prompts, n, fixed, problem_ids=problem_ids)
        check_lengths(rollouts.lengths.tolist(), sampling.max_new_tokens, "ablate")
        return rollouts

    def __getattr__(self, name: str) -> Any:  # sync_weights etc. reach the wrapped engine
        if name == "inner":  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)


def fixed_length_engine(model, tokenizer) -> FixedLengthEngine:
    """An `EngineFactory` for `setup_trial`: our HF sampler at a fixed completion length."""
    from ablate.rollout.hf import HFEngine

    return FixedLengthEngine(HFEngine(model, tokenizer))


def natural_engine(model, tokenizer):
    """An `EngineFactory` for `setup_trial`: the engine a trial samples with by default."""
    from ablate.rollout.hf import HFEngine

    return HFEngine(model, tokenizer)


def check_lengths(lengths: list[int], expected: int, tool: str) -> None:
    """LengthError unless every completion has exactly `expected` tokens."""
    wrong = sorted({n for n in lengths if n != expected})
    if not lengths or wrong:
        raise LengthError(
            f"{tool}: completions must all have {expected} tokens, got lengths {wrong or 'none'}"
        )


def check_max_length(lengths: list[int], limit: int, tool: str) -> None:
    """LengthError unless every completion has 1..`limit` tokens (natural-length cases)."""
    wrong = sorted({n for n in lengths if not 1 <= n <= limit})
    if not lengths or wrong:
        raise LengthError(
            f"{tool}: completions must have 1..{limit} tokens, got lengths {wrong or 'none'}"
        )


@dataclass(frozen=True)
class StepCase:
    """The work of one RL step: `prompts` × `group` completions of `new_tokens` tokens, or of
    at most `new_tokens` tokens each, ending at EOS, when `natural`."""

    size: str
    prompts: int = 8
    group: int = 8
    new_tokens: int = 16
    natural: bool = False

    @property
    def label(self) -> str:
        length = f"T≤{self.new_tokens} natural" if self.natural else f"T={self.new_tokens}"
        return f"{self.size} P={self.prompts} G={self.group} {length}"


@dataclass(frozen=True)
class StepRecord:
    """What one timed ablate step cost; `wall` = rl_step + log_metrics."""

    wall: float
    gen: float
    train: float
    diagnostics: float
    tracking: float
    update_tokens: float
    mean_length: float = 0.0  # completion tokens per sample (EOS included)

    @property
    def harness(self) -> float:
        return self.diagnostics + self.tracking


class AblateStepper:
    """A trial set up for benchmarking (GRPO without KL: one update per rollout), stepped on
    demand. `tracker` is any `Tracker`; the suite passes a real MLflow run."""

    def __init__(self, case: StepCase, folder: Path, tracker: Any, seed: int = 0) -> None:
        from ablate import baseline
        from ablate.factors.spec import Budget, Optim, TrialSpec
        from ablate.models import load_model
        from ablate.stages.batch import PromptStream
        from ablate.trial import TrainState, setup_trial

        spec = TrialSpec(
            algorithm=dataclasses.replace(baseline("grpo"), kl_coef=0.0),
            model=str(folder),
            budget=Budget(
                prompts_per_step=case.prompts,
                group_size=case.group,
                max_new_tokens=case.new_tokens,
            ),
            optim=Optim(lr=LR),
            seed=seed,
        )
        self.case, self.tracker = case, tracker
        engine = natural_engine if case.natural else fixed_length_engine
        self.setup = setup_trial(spec, loaded=load_model(folder), engine=engine)
        self.state = TrainState()
        self.stream = PromptStream(self.setup.task.problems("train"), seed)

    @property
    def model(self):
        return self.setup.model

    def step(self) -> StepRecord:
        """One rl_step plus its log_metrics, timed."""
        from ablate.trial import rl_step

        start = time.perf_counter()
        metrics = rl_step(self.setup, self.state, self.stream)
        logged = time.perf_counter()
        self.tracker.log_metrics(metrics, self.state.step)
        end = time.perf_counter()
        return StepRecord(
            wall=end - start,
            gen=metrics["perf/gen_seconds"],
            train=metrics["perf/train_seconds"],
            diagnostics=metrics["perf/diagnostics_seconds"],
            tracking=end - logged,
            update_tokens=metrics["perf/update_tokens"],
            mean_length=metrics["length/mean"],
        )
