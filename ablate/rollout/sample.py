"""Sample and verify: the one place that calls an engine's `generate` and a task's `verify`.
Training batches, the held-out eval, the Pass@G sweep and the zoo's measurements all sample
through `sample_and_verify`, so they agree on what a sample and its verdict are."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ablate.base.records import SamplingParams, ScoredBatch
from ablate.factors.spec import Budget
from ablate.rollout.base import RolloutEngine
from ablate.tasks.base import Problem, Task
from ablate.tasks.templates import Template


def sampling_for(budget: Budget, template: Template, seed: int) -> SamplingParams:
    """A training batch's sampling: the budget's limits, the template's stop strings."""
    return SamplingParams(
        max_new_tokens=budget.max_new_tokens,
        temperature=budget.temperature,
        top_p=budget.top_p,
        top_k=budget.top_k,
        stop=tuple(template.stop),
        seed=seed,
    )


def sample_and_verify(
    engine: RolloutEngine,
    problems: Sequence[Problem],
    template: Template,
    task: Task,
    sampling: SamplingParams,
    *,
    n: int,
) -> ScoredBatch:
    """`n` completions per problem (groups contiguous), each verified. One `generate` call,
    with `sampling` as given."""
    rollouts = engine.generate(
        [template.render(p.question) for p in problems],
        n,
        sampling,
        problem_ids=[p.id for p in problems],
    )
    verdicts = [task.verify(problems[b // n], t, template) for b, t in enumerate(rollouts.texts)]
    scores = torch.tensor([v.reward for v in verdicts], dtype=torch.float32)
    correct = torch.tensor([bool(v.correct) for v in verdicts], dtype=torch.bool)
    return ScoredBatch(rollouts=rollouts, verdicts=verdicts, scores=scores, correct=correct)


def correct_matrix(batch: ScoredBatch, n: int) -> np.ndarray:
    """The [problems, n] bool correctness of a `sample_and_verify(..., n=n)` batch."""
    return batch.correct.numpy().reshape(-1, n)
