"""Held-out evaluation of the current policy: pass@1 (mean over n samples), pass@k (logged as
eval/pass_at_k: MLflow names cannot hold "@"), length of correct and incorrect answers,
truncation, tokens generated per correct answer (inference cost), self-checks; and when the
trainer evaluates on a compute cadence (`due_marks`: linear or log-spaced, in generated tokens or
model FLOPs).

The eval sampling seed depends only on the trial seed, so every arm with the same seed evaluates
the same base model to the same numbers (common random numbers)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from ablate.base.errors import ConfigError
from ablate.base.passk import mean_pass_at_k
from ablate.base.records import SamplingParams, ScoredBatch
from ablate.base.seeding import derive_seed
from ablate.factors.eval_spec import SELECTION_METRIC, EvalSpec
from ablate.rollout.base import RolloutEngine
from ablate.rollout.sample import correct_matrix, sample_and_verify
from ablate.stages.diagnostics import length_metrics
from ablate.tasks.base import Task
from ablate.tasks.templates import Template


def evaluate(
    engine: RolloutEngine,
    task: Task,
    template: Template,
    spec: EvalSpec,
    *,
    max_new_tokens: int,
    seed: int,
) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """Metrics (eval/…) and one record per sample (for per-problem paired tests later)."""
    problems = task.problems("eval")[: spec.max_problems]
    n = spec.n_samples
    sampling = SamplingParams(
        max_new_tokens=max_new_tokens,
        temperature=spec.temperature,
        stop=tuple(template.stop),
        seed=derive_seed(seed, "eval"),
    )
    batch = sample_and_verify(engine, problems, template, task, sampling, n=n)
    rollouts, verdicts = batch.rollouts, batch.verdicts
    matrix = correct_matrix(batch, n)
    metrics = {f"eval/pass_at_{k}": mean_pass_at_k(matrix, k) for k in spec.ks}
    # pass@1 as the plain mean correctness (equal to the estimator's, up to rounding)
    metrics["eval/pass_at_1"] = float(matrix.mean())
    metrics.update(_length_metrics(batch))
    checks = [v.self_check for v in verdicts]
    if any(c is not None for c in checks):
        metrics["eval/self_check_rate"] = float(np.mean([bool(c) for c in checks]))
    metrics["eval/verifier_errors"] = float(sum(v.error is not None for v in verdicts))
    if spec.selection_problems:
        metrics[SELECTION_METRIC] = _selection_pass_at_1(engine, task, template, spec, sampling)
    records = [
        {
            "problem_id": problems[b // n].id,
            "sample": b % n,
            "correct": bool(v.correct),
            "reward": float(v.reward),
            "length": int(rollouts.lengths[b]),
            "truncated": bool(rollouts.truncated[b]),
            "answer": v.answer,
            "error": v.error,
            "completion": rollouts.texts[b],
        }
        for b, v in enumerate(verdicts)
    ]
    return metrics, records


def selection_split(task: Task, spec: EvalSpec) -> list:
    """The eval split's problems after the first `max_problems`; ConfigError when it has none
    left (checked before a study runs, by `preflight`)."""
    start = spec.max_problems or 0
    problems = task.problems("eval")[start : start + spec.selection_problems]
    if spec.selection_problems and not problems:
        raise ConfigError(
            f"eval.selection_problems: the eval split has no problems after the first "
            f"{start}: lower max_problems"
        )
    return problems


def _selection_pass_at_1(engine, task, template, spec: EvalSpec, sampling) -> float:
    """pass@1 on the selection split (`selection_split`)."""
    problems = selection_split(task, spec)
    sampling = dataclasses.replace(sampling, seed=derive_seed(sampling.seed, "selection"))
    batch = sample_and_verify(engine, problems, template, task, sampling, n=spec.n_samples)
    return float(correct_matrix(batch, spec.n_samples).mean())


def token_mark(every_tokens: float, before: float, after: float) -> float | None:
    """The largest multiple of `every_tokens` reached when a compute counter (generated tokens,
    model FLOPs) went from `before` to `after`, if that crossed one (None otherwise, or with the
    cadence off). Needs no state beyond the counter, so a resumed trial evaluates where an
    uninterrupted one does."""
    if every_tokens <= 0 or after // every_tokens == before // every_tokens:
        return None
    return after // every_tokens * every_tokens


def log_mark(first: float, per_decade: int, before: float, after: float) -> float | None:
    """The largest mark first × 10^(k / per_decade), k = 0, 1, …, in (before, after], if any
    (None otherwise, or with `first` 0): the log-spaced cadence, stateless like `token_mark`."""
    if first <= 0 or after < first:
        return None
    k = math.floor(per_decade * math.log10(after / first) + 1e-9)
    mark = first * 10 ** (k / per_decade)
    return mark if before < mark * (1 - 1e-12) else None


#: the mark metric of each compute axis the eval cadence counts
MARK_METRICS = {"tokens": "eval/token_mark", "flops": "eval/flops_mark"}


def due_marks(
    spec: EvalSpec, before: dict[str, float], after: dict[str, float]
) -> dict[str, float]:
    """eval/token_mark and eval/flops_mark: on each axis ("tokens", "flops") the largest mark
    of its cadences (linear, log-spaced) that the step from `before` to `after` crossed."""
    every = {"tokens": spec.every_tokens, "flops": spec.every_flops}
    out = {}
    for axis, name in MARK_METRICS.items():
        found = [token_mark(every[axis], before[axis], after[axis])]
        if spec.log_axis == axis:
            found.append(log_mark(spec.log_from, spec.log_per_decade, before[axis], after[axis]))
        crossed = [m for m in found if m is not None]
        if crossed:
            out[name] = float(max(crossed))
    return out


#: eval/ name of each `diagnostics.length_metrics` value logged at evaluation
_EVAL_LENGTH_NAMES = {
    "length/mean": "eval/length_mean",
    "length/correct_mean": "eval/length_correct",
    "length/incorrect_mean": "eval/length_incorrect",
    "length/truncation_rate": "eval/truncation_rate",
}


def _length_metrics(batch: ScoredBatch) -> dict[str, float]:
    r, correct = batch.rollouts, batch.correct
    lengths = length_metrics(r.lengths, correct, r.truncated)
    metrics = {name: lengths[key] for key, name in _EVAL_LENGTH_NAMES.items()}
    if correct.any():  # undefined without a correct answer: not logged rather than inf
        metrics["eval/tokens_per_correct"] = float(
            r.lengths.numpy().astype(float).sum() / correct.numpy().sum()
        )
    return metrics
