"""Held-out evaluation of the current policy: pass@1 (mean over n samples), pass@k (logged as
eval/pass_at_k: MLflow names cannot hold "@"), length of correct and incorrect answers,
truncation, tokens generated per correct answer (inference cost), self-checks; and when the
trainer evaluates on a token cadence (`token_mark`).

The eval sampling seed depends only on the trial seed, so every arm with the same seed evaluates
the same base model to the same numbers (common random numbers)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ablate.rollout.base import RolloutEngine, SamplingParams
from ablate.seeding import derive_seed
from ablate.tasks.base import Task
from ablate.templates import Template
from ablate.trial import EvalSpec


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
    from ablate.passk import pass_at_k

    problems = task.problems("eval")[: spec.max_problems]
    n = spec.n_samples
    sampling = SamplingParams(
        max_new_tokens=max_new_tokens,
        temperature=spec.temperature,
        stop=tuple(template.stop),
        seed=derive_seed(seed, "eval"),
    )
    rollouts = engine.generate(
        [template.render(p.question) for p in problems],
        n,
        sampling,
        problem_ids=[p.id for p in problems],
    )
    verdicts = [task.verify(problems[b // n], t, template) for b, t in enumerate(rollouts.texts)]
    correct = np.array([v.correct for v in verdicts], dtype=bool)
    lengths = rollouts.lengths.numpy().astype(float)
    per_problem = correct.reshape(len(problems), n).sum(axis=1)
    metrics = {
        f"eval/pass_at_{k}": float(np.mean(pass_at_k(np.full(len(problems), n), per_problem, k)))
        for k in spec.ks
    }
    metrics["eval/pass_at_1"] = float(correct.mean())
    metrics.update(_length_metrics(correct, lengths, rollouts.truncated.numpy()))
    checks = [v.self_check for v in verdicts]
    if any(c is not None for c in checks):
        metrics["eval/self_check_rate"] = float(np.mean([bool(c) for c in checks]))
    metrics["eval/verifier_errors"] = float(sum(v.error is not None for v in verdicts))
    records = [
        {
            "problem_id": problems[b // n].id,
            "sample": b % n,
            "correct": bool(v.correct),
            "reward": float(v.reward),
            "length": int(lengths[b]),
            "truncated": bool(rollouts.truncated[b]),
            "answer": v.answer,
            "error": v.error,
            "completion": rollouts.texts[b],
        }
        for b, v in enumerate(verdicts)
    ]
    return metrics, records


def token_mark(every_tokens: int, before: int, after: int) -> int | None:
    """The largest multiple of `every_tokens` reached when the generated-token count went from
    `before` to `after`, if that crossed one (None otherwise, or with the cadence off). Needs no
    state beyond the counter, so a resumed trial evaluates where an uninterrupted one does."""
    if every_tokens <= 0 or after // every_tokens == before // every_tokens:
        return None
    return after // every_tokens * every_tokens


def _length_metrics(correct: np.ndarray, lengths: np.ndarray, truncated: np.ndarray) -> dict:
    metrics = {
        "eval/length_mean": float(lengths.mean()),
        "eval/length_correct": float(lengths[correct].mean()) if correct.any() else float("nan"),
        "eval/length_incorrect": (
            float(lengths[~correct].mean()) if (~correct).any() else float("nan")
        ),
        "eval/truncation_rate": float(truncated.mean()),
    }
    if correct.any():  # undefined without a correct answer: not logged rather than inf
        metrics["eval/tokens_per_correct"] = float(lengths.sum() / correct.sum())
    return metrics
