"""Held-out evaluation of the current policy: pass@1 (mean over n samples), pass@k (logged as
eval/pass_at_k: MLflow names cannot hold "@"), length of
correct and incorrect answers, truncation, accuracy per 1,000 generated tokens, self-checks.

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


def _length_metrics(correct: np.ndarray, lengths: np.ndarray, truncated: np.ndarray) -> dict:
    total_tokens = lengths.sum()
    return {
        "eval/length_mean": float(lengths.mean()),
        "eval/length_correct": float(lengths[correct].mean()) if correct.any() else float("nan"),
        "eval/length_incorrect": (
            float(lengths[~correct].mean()) if (~correct).any() else float("nan")
        ),
        "eval/truncation_rate": float(truncated.mean()),
        "eval/acc_per_1k_tokens": float(1000.0 * correct.sum() / max(total_tokens, 1.0)),
    }
