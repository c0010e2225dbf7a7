"""One trial, top to bottom: set up → (evaluate) → [step → log → evaluate / checkpoint] until
the budget is spent → final evaluation; resumed from its last checkpoint when there is one.

The trainer never touches the terminal: progress goes to a callback the CLI supplies.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ablate.base import faults
from ablate.base.devices import autocast
from ablate.base.errors import DivergedError, TrialError
from ablate.base.store.port import NullTracker, Tracker
from ablate.base.store.tags import OUTCOME, OUTCOME_MESSAGE
from ablate.factors.spec import TrialSpec
from ablate.stages.batch import PromptStream
from ablate.stages.checkpoint import load_latest, save_checkpoint
from ablate.trial.evaluation import due_marks, evaluate
from ablate.trial.setup import EngineFactory, Setup, TrainState, setup_trial
from ablate.trial.step import rl_step

Progress = Callable[[int, int, dict[str, float]], None]


@dataclass
class TrialResult:
    trial_id: str
    outcome: str  # "finished" | "diverged" | "failed"
    steps: int
    final_eval: dict[str, float] = field(default_factory=dict)
    budget: dict[str, float] = field(default_factory=dict)
    message: str = ""
    wall_seconds: float = 0.0


def budget_spent(spec: TrialSpec, state: TrainState) -> bool:
    b = spec.budget
    if state.step >= b.max_steps:
        return True
    cap = b.max_generated_tokens
    return cap is not None and state.counters.generated_tokens >= cap


def _evaluate(
    s: Setup, state: TrainState, tracker: Tracker, marks: dict[str, float] | None = None
) -> dict[str, float]:
    """Evaluate and log at the current step; `marks`: the compute marks this eval stands for
    (eval/token_mark, eval/flops_mark)."""
    metrics, records = evaluate(
        s.engine,
        s.task,
        s.template,
        s.spec.eval,
        max_new_tokens=s.spec.budget.max_new_tokens,
        seed=s.spec.rng_seed,
    )
    metrics.update(
        {k.replace("budget/", "eval/budget_"): v for k, v in state.counters.as_metrics().items()}
    )
    metrics.update(marks or {})
    tracker.log_metrics(metrics, state.step)
    tracker.log_samples("eval", records, state.step)
    return metrics


def train(
    spec: TrialSpec,
    *,
    tracker: Tracker | None = None,
    run_dir: Path | str | None = None,
    loaded: tuple[Any, Any] | None = None,
    engine: EngineFactory | None = None,
    progress: Progress | None = None,
) -> TrialResult:
    """Run (or resume, when `run_dir` holds a checkpoint) one trial to its budget."""
    tracker = tracker or NullTracker()
    s = setup_trial(spec, loaded=loaded, engine=engine)
    state = _start_or_resume(s, run_dir, tracker)
    stream = PromptStream(
        s.task.problems("train"),
        spec.rng_seed,
        state.stream_position,
        history=state.prompt_history,
        retired=state.retired_prompts,
    )
    result = TrialResult(spec.id, "finished", state.step)
    last_eval: dict[str, float] = {}
    try:
        with autocast(s.device, s.precision):  # sampling, frozen passes and updates alike
            if state.step == 0 and spec.eval.at_start:
                last_eval = _evaluate(s, state, tracker)
            while not budget_spent(spec, state):
                metrics = _step_and_eval(s, state, stream, tracker)
                _after_step(s, state, run_dir, progress, metrics, tracker)
            last_eval = _evaluate(s, state, tracker)
        _checkpoint(s, state, run_dir, tracker)
        faults.point("final_eval", state.step)
    except DivergedError as exc:
        result.outcome, result.message = "diverged", str(exc)
    except TrialError as exc:
        result.outcome, result.message = "failed", str(exc)
    result.steps, result.final_eval = state.step, last_eval
    result.budget, result.wall_seconds = state.counters.as_metrics(), state.wall_seconds
    tracker.set_tags({OUTCOME: result.outcome, OUTCOME_MESSAGE: result.message[:4000]})
    return result


def _step_and_eval(
    s: Setup, state: TrainState, stream: PromptStream, tracker: Tracker
) -> dict[str, float]:
    """One RL step, logged, then the eval it is due (if any); their metrics together."""
    t0 = time.perf_counter()
    before = state.axes()
    metrics = rl_step(s, state, stream)
    state.wall_seconds += time.perf_counter() - t0
    metrics["budget/wall_seconds"] = state.wall_seconds
    tracker.log_metrics(metrics, state.step)
    faults.point("step_logged", state.step)
    marks = due_marks(s.spec.eval, before, state.axes())
    if _eval_due(s.spec, state, marks):
        metrics = {**metrics, **_evaluate(s, state, tracker, marks)}
    return metrics


def _eval_due(spec: TrialSpec, state: TrainState, marks: dict[str, float]) -> bool:
    """Whether the step just done ends with an eval: on the step cadence or at a compute mark,
    once however many marks it crossed; never in the last step, whose eval is the final one."""
    every = spec.eval.every
    on_cadence = bool(every) and state.step % every == 0
    return (on_cadence or bool(marks)) and not budget_spent(spec, state)


def _after_step(s, state, run_dir, progress, metrics, tracker) -> None:
    if s.spec.checkpoint_every and state.step % s.spec.checkpoint_every == 0:
        _checkpoint(s, state, run_dir, tracker)
    if progress is not None:
        progress(state.step, s.spec.budget.max_steps, metrics)


def _checkpoint(s: Setup, state: TrainState, run_dir, tracker: Tracker) -> None:
    """Metrics first, then the checkpoint: once a checkpoint of step C exists, the tracker holds
    every step up to C, so a resume from C loses nothing (and skips what it holds after C)."""
    if run_dir is None:
        return
    tracker.flush()
    faults.point("metrics_flushed", state.step)
    save_checkpoint(
        Path(run_dir),
        step=state.step,
        model=s.model,
        optimizer=s.optimizer,
        scheduler=s.scheduler,
        state={"trial_id": s.spec.id, **state.as_dict()},
        estimator_state=s.estimator.state_dict(),
        engine_state=s.engine_with_state.state() if s.engine_with_state else None,
    )


def _start_or_resume(s: Setup, run_dir, tracker: Tracker) -> TrainState:
    saved = None
    if run_dir is not None:
        saved = load_latest(
            Path(run_dir),
            model=s.model,
            optimizer=s.optimizer,
            scheduler=s.scheduler,
            estimator=s.estimator,
            engine=s.engine_with_state,
        )
    if saved is not None:
        if saved.pop("trial_id") != s.spec.id:
            raise TrialError(f"{run_dir} holds a checkpoint of another trial; use a fresh run_dir")
        return TrainState.from_dict(saved)
    # model, template, task and seed are params; the trial id is the run's `ablate.trial_id` tag
    tracker.log_params(_flat_params(s.spec))
    return TrainState()


def _flat_params(spec: TrialSpec) -> dict[str, Any]:
    d = spec.as_dict()
    flat = {f"algo.{k}": v for k, v in d.pop("algorithm").items()}
    for group in ("budget", "optim", "eval"):
        flat.update({f"{group}.{k}": v for k, v in d.pop(group).items()})
    flat.update({k: v for k, v in d.items()})
    return flat
