"""pass@k and friends from (n samples, c correct) per problem, with bootstrap CIs over problems,
and the base-model × template sweep that measures them before any training.

- pass@k  = 1 − C(n−c, k)/C(n, k)  (Chen et al. 2021), in the stable product form
            1 − ∏_{i=n−c+1}^{n} (1 − k/i);
- pass^k  = C(c, k)/C(n, k)  (all k correct) = ∏_{i=0}^{k−1} (c − i)/(n − i);
- signal  = pass@G − pass^G: the probability that a group of G samples holds both a correct and
            an incorrect answer, i.e. that GRPO's group advantage is non-zero.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ablate.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

    from ablate.rollout.base import RolloutEngine, SamplingParams
    from ablate.study import Study

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


def _checked_counts(n, c, k: int) -> tuple[np.ndarray, np.ndarray]:
    """n, c as int64 arrays of one shape; ConfigError for k > n, c outside [0, n], k < 1."""
    n_arr, c_arr = np.broadcast_arrays(np.asarray(n), np.asarray(c))
    whole = np.all(n_arr == np.round(n_arr)) and np.all(c_arr == np.round(c_arr))
    if not whole:
        raise ConfigError("sample counts n and correct counts c must be integers")
    n_arr, c_arr = n_arr.astype(np.int64), c_arr.astype(np.int64)
    if int(k) != k or k < 1:
        raise ConfigError(f"k must be an integer >= 1, got {k!r}")
    if np.any(c_arr < 0) or np.any(c_arr > n_arr):
        raise ConfigError("correct counts c must lie in [0, n] for every problem")
    if np.any(n_arr < k):
        raise ConfigError(
            f"pass@{k} needs at least k={k} samples per problem, but some problem has only "
            f"n={int(n_arr.min())}: raise n or drop k"
        )
    return n_arr, c_arr


def pass_at_k(n, c, k: int) -> np.ndarray:
    """Unbiased pass@k per problem (float64 array shaped like n, c)."""
    n_arr, c_arr = _checked_counts(n, c, k)
    if n_arr.size == 0:
        return np.zeros(n_arr.shape)
    # i runs over n−c+1 … n; masked terms are 1. Where n − c < k the estimate is exactly 1
    # (every k-subset holds a correct sample) and a factor (1 − k/i) would be ≤ 0.
    i = np.arange(1, int(n_arr.max()) + 1, dtype=np.float64)
    flat_n, flat_c = n_arr.reshape(-1, 1), c_arr.reshape(-1, 1)
    in_range = (i > flat_n - flat_c) & (i <= flat_n)
    terms = np.where(in_range, 1.0 - k / i, 1.0)
    result = 1.0 - np.prod(terms, axis=1)
    result[(flat_n - flat_c).ravel() < k] = 1.0
    return result.reshape(n_arr.shape)


def pass_hat_k(n, c, k: int) -> np.ndarray:
    """Unbiased pass^k per problem: the probability that k samples are all correct."""
    n_arr, c_arr = _checked_counts(n, c, k)
    i = np.arange(int(k), dtype=np.float64)
    flat_n, flat_c = n_arr.reshape(-1, 1), c_arr.reshape(-1, 1)
    terms = np.maximum(flat_c - i, 0.0) / (flat_n - i)
    return np.prod(terms, axis=1).reshape(n_arr.shape)


def signal_probability(n, c, group_size: int) -> np.ndarray:
    """Per problem: P(a group of `group_size` samples is neither all wrong nor all right)."""
    return pass_at_k(n, c, group_size) - pass_hat_k(n, c, group_size)


def pass_at_k_per_problem(correct, k: int) -> np.ndarray:
    """pass@k of each problem from a [problems, n] correctness matrix."""
    correct = np.asarray(correct, dtype=bool)
    return pass_at_k(np.full(correct.shape[0], correct.shape[1]), correct.sum(axis=1), k)


def mean_pass_at_k(correct, k: int) -> float:
    """pass@k averaged over problems, from a [problems, n] correctness matrix (NaN if empty)."""
    return _mean(pass_at_k_per_problem(correct, k))


def bootstrap_ci(
    values, *, reps: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of `values` (one per problem), resampling problems."""
    data = np.asarray(values, dtype=np.float64).ravel()
    if data.size == 0:
        return float("nan"), float("nan")
    if not 0 < level < 1:
        raise ConfigError(f"confidence level must be in (0, 1), got {level!r}")
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(int(reps), data.size))].mean(axis=1)
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)


def passk_rows(
    correct: np.ndarray, ks: Sequence[int], *, reps: int = 2000, seed: int = 0
) -> list[dict[str, float]]:
    """One row per k from a [problems, n] correctness matrix: the mean of each estimator over
    problems, and a bootstrap CI of pass@k."""
    correct = np.asarray(correct, dtype=bool)
    n = np.full(correct.shape[0], correct.shape[1])
    c = correct.sum(axis=1)
    rows = []
    for k in ks:
        per_problem = pass_at_k_per_problem(correct, k)
        low, high = bootstrap_ci(per_problem, reps=reps, seed=seed)
        rows.append(
            {
                "k": int(k),
                "pass_at_k": _mean(per_problem),
                "ci_low": low,
                "ci_high": high,
                "pass_hat_k": _mean(pass_hat_k(n, c, k)),
                "signal_fraction": _mean(signal_probability(n, c, k)),
            }
        )
    return rows


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if values.size else float("nan")


# -- the base-model × template sweep ------------------------------------------------------------

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
    `ablate.templates.get_template`). Each template's stop strings are added to `sampling.stop`.
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
    from ablate.batch import correct_matrix, sample_and_verify
    from ablate.seeding import derive_seed

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
        from ablate.tasks import get_task

        return get_task(task)
    return task


def _resolve_template(template):
    if isinstance(template, str):
        from ablate.templates import get_template

        return get_template(template)
    return template


def passk_phase(study: Study, cache_dir: Path, progress=None):
    """Pass@k of every base model × template before RL, cached per model/template/task/n."""
    import pandas as pd

    from ablate.models import load_model, resolve_model_path, weights_hash
    from ablate.rollout.base import SamplingParams
    from ablate.rollout.hf import HFEngine

    p = study.passk
    frames = []
    # every model any trial starts from (extra cells included): gain vs base Pass@G needs them
    models = list(dict.fromkeys(model for _, model, _, _ in study.cells()))
    for model in models:
        for template in p.templates or study.templates:
            # the weights, not only the folder: a model rebuilt in place is measured again
            where = f"{resolve_model_path(model)}@{weights_hash(model)}"
            key = _passk_key(study, where, template)
            cached = cache_dir / f"{key}.csv"
            if cached.is_file():
                frames.append(pd.read_csv(cached))
                continue
            sampling = SamplingParams(
                max_new_tokens=study.budget.max_new_tokens,
                temperature=p.temperature,
                seed=study.seeds[0],
            )
            from ablate.tasks import get_task

            frame = passk_sweep(
                [model],
                [template],
                get_task(study.task, **dict(study.task_options)),
                n=p.n,
                ks=p.ks,
                sampling=sampling,
                max_problems=p.max_problems,
                engine_factory=lambda name: HFEngine(*load_model(name)),
                progress=progress,
            )
            cached.parent.mkdir(parents=True, exist_ok=True)
            frame.to_csv(cached, index=False)
            frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def _passk_key(study: Study, model_path: str, template: str) -> str:
    p = study.passk
    blob = json.dumps(
        [
            model_path,
            template,
            study.task,
            sorted(study.task_options.items()),
            p.n,
            list(p.ks),
            p.max_problems,
            p.temperature,
            study.budget.max_new_tokens,
            study.seeds[0],
        ],
        default=repr,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
