"""The base-model × template sweep: `n` samples of every eval problem per (model, template),
verified, tabulated as pass@k with bootstrap CIs (`ablate.base.passk`). Used by `ablate passk` and,
cached per cell, by a study's Pass@G phase."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ablate.base.errors import ConfigError
from ablate.base.passk import passk_rows
from ablate.base.records import SamplingParams
from ablate.base.seeding import derive_seed
from ablate.rollout.base import RolloutEngine
from ablate.rollout.sample import correct_matrix, sample_and_verify
from ablate.tasks import get_task
from ablate.tasks.templates import get_template

if TYPE_CHECKING:
    import pandas as pd

SWEEP_COLUMNS = (
    "model",
    "template",
    "k",
    "pass_at_k",
    "ci_low",
    "ci_high",
    "pass_hat_k",
    "signal_fraction",
    "mean_length",
    "n_problems",
    "n_samples",
    "verifier_errors",
)

Progress = Callable[[str, int, int], None]  # (what, done, total)


def passk_sweep(
    models: Sequence[str],
    templates: Sequence[Any],
    task: Any,
    *,
    n: int,
    ks: Sequence[int],
    sampling: SamplingParams,
    engine_factory: Callable[[str], RolloutEngine],
    max_problems: int | None = None,
    progress: Progress | None = None,
    prompts_per_batch: int = 32,
    bootstrap_reps: int = 2000,
    on_cell: Callable[[list[dict[str, Any]]], None] | None = None,
) -> pd.DataFrame:
    """Sample `n` completions per eval problem for every (model, template) and tabulate pass@k.

    `task` / `templates` are objects or names (`ablate.tasks.get_task`,
    `ablate.tasks.templates.get_template`). Each template's stop strings are added to
    `sampling.stop`.
    Every cell uses the same sampling seeds (common random numbers across models and templates).
    `on_cell(rows)` is called after each cell: the hook where experiment tracking (MLflow) plugs in.
    """
    import pandas as pd

    ks = [int(k) for k in ks]
    if not ks:
        raise ConfigError("give at least one k")
    if max(ks) > n or min(ks) < 1:
        raise ConfigError(f"every k must lie in [1, n={n}], got ks={ks}: raise --n or drop k")
    task = _resolve_task(task)
    resolved_templates = [_resolve_template(t) for t in templates]
    problems = task.problems("eval")[:max_problems]
    if not problems:
        raise ConfigError(f"task {getattr(task, 'name', task)!r} has no eval problems")
    rows: list[dict[str, Any]] = []
    for model_name in models:
        engine = engine_factory(model_name)
        for template in resolved_templates:
            label = f"{model_name} × {template.name}"
            correct, lengths, errors = _sample_cell(
                engine, task, problems, template, n, sampling, prompts_per_batch, label, progress
            )
            cell = [
                {
                    "model": model_name,
                    "template": template.name,
                    **row,
                    "mean_length": float(np.mean(lengths)),
                    "n_problems": len(problems),
                    "n_samples": int(correct.size),
                    "verifier_errors": errors,
                }
                for row in passk_rows(correct, ks, reps=bootstrap_reps, seed=sampling.seed)
            ]
            if on_cell is not None:
                on_cell(cell)
            rows.extend(cell)
    return pd.DataFrame(rows, columns=list(SWEEP_COLUMNS))


def _sample_cell(
    engine, task, problems, template, n, sampling, prompts_per_batch, label, progress
) -> tuple[np.ndarray, np.ndarray, int]:
    """(correct [problems, n] bool, completion lengths, verifier error count) for one cell."""
    stops = tuple(dict.fromkeys((*sampling.stop, *getattr(template, "stop", ()))))
    correct: list[np.ndarray] = []
    lengths: list[np.ndarray] = []
    errors = 0
    if progress is not None:  # the cell's label before its first batch, which takes a while
        progress(label, 0, len(problems))
    for start in range(0, len(problems), prompts_per_batch):
        chunk = problems[start : start + prompts_per_batch]
        chunk_sampling = dataclasses.replace(
            sampling, stop=stops, seed=derive_seed(sampling.seed, "passk", str(start))
        )
        batch = sample_and_verify(engine, chunk, template, task, chunk_sampling, n=n)
        correct.append(correct_matrix(batch, n))
        errors += sum(v.error is not None for v in batch.verdicts)
        lengths.append(batch.rollouts.lengths.numpy())
        if progress is not None:
            progress(label, min(start + prompts_per_batch, len(problems)), len(problems))
    return np.concatenate(correct), np.concatenate(lengths), errors


def _resolve_task(task):
    if isinstance(task, str):
        return get_task(task)
    return task


def _resolve_template(template):
    if isinstance(template, str):
        return get_template(template)
    return template
