"""Run a study: the Pass@G phase (cached), then every trial not yet FINISHED, locally in one or
N processes. Resume is free: finished trials are skipped, killed ones continue from their last
checkpoint in the same MLflow run; a failed trial is recorded with its reason and the rest go on.
"""

from __future__ import annotations

import hashlib
import json
import os
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ablate.study import Study, Trial

TrialStart = Callable[[Trial, int, int], None]
StepHook = Callable[[int, int, dict[str, float]], None]


@dataclass
class TrialOutcome:
    trial_id: str
    arm: str
    model: str
    template: str
    seed: int
    outcome: str  # finished | diverged | failed | skipped
    message: str = ""
    final_eval: dict[str, float] | None = None


@dataclass
class RunHooks:
    """Callbacks for progress display (the CLI supplies rich bars)."""

    on_phase: Callable[[str], None] | None = None
    on_trial_start: TrialStart | None = None
    on_step: StepHook | None = None
    on_trial_end: Callable[[TrialOutcome], None] | None = None
    on_passk: Callable[[str, int, int], None] | None = None


def results_paths(results_dir: str | Path, study: Study) -> dict[str, Path]:
    root = Path(results_dir).resolve()
    return {"root": root, "study": root / study.name, "passk": root / "passk-cache"}


def run_study(
    study: Study,
    *,
    results_dir: str | Path = "results",
    workers: int = 1,
    tracking_uri: str | None = None,
    hooks: RunHooks | None = None,
) -> list[TrialOutcome]:
    """Pass@G phase, then the trials; returns one outcome per trial of the study."""
    from ablate import tracking

    hooks = hooks or RunHooks()
    paths = results_paths(results_dir, study)
    uri = tracking_uri or tracking.default_tracking_uri(paths["root"])
    tracking.init_store(uri)  # before any fan-out: sqlite races on schema creation
    parent = tracking.MLflowStudy(uri, study.name)
    parent.set_tags({"ablate.reference_arm": study.reference_arm, **tracking.environment_tags()})
    if study.passk is not None:
        _notify(hooks.on_phase, "passk")
        table = passk_phase(study, paths["passk"], hooks.on_passk)
        csv = paths["study"] / "passk.csv"
        csv.parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(csv, index=False)
        parent.log_artifact(csv)
    _notify(hooks.on_phase, "trials")
    statuses = parent.trial_status()
    trials = study.trials()
    todo = [t for t in trials if statuses.get(t.id) != "FINISHED"]
    skipped = [_outcome(t, "skipped", "already FINISHED") for t in trials if t not in todo]
    if workers <= 1:
        done = [
            run_trial(study, t, uri, paths["study"], hooks, i, len(todo))
            for i, t in enumerate(todo)
        ]
    else:
        done = _run_parallel(study, todo, uri, paths["study"], workers, hooks)
    parent.close("FINISHED")
    return skipped + done


def _notify(hook, *args) -> None:
    if hook is not None:
        hook(*args)


def _outcome(trial: Trial, outcome: str, message: str = "", final=None) -> TrialOutcome:
    s = trial.spec
    return TrialOutcome(trial.id, trial.arm, s.model, s.template, s.seed, outcome, message, final)


def trial_tags(study: Study, trial: Trial) -> dict[str, str]:
    from ablate import tracking

    s = trial.spec
    reference = study.arm(study.reference_arm).algorithm
    return {
        "ablate.arm": trial.arm,
        "ablate.trial_id": trial.id,
        "ablate.seed": str(s.seed),
        "ablate.model": s.model,
        "ablate.template": s.template,
        "ablate.task": s.task,
        "ablate.budget": json.dumps(s.budget.__dict__, sort_keys=True),
        **tracking.algorithm_diff_tags(s.algorithm, reference),
        **tracking.environment_tags(),
    }


def run_trial(
    study: Study, trial: Trial, uri: str, study_dir: Path, hooks: RunHooks, index: int, total: int
) -> TrialOutcome:
    """Train one trial into its MLflow child run; any failure is recorded, never raised."""
    from ablate import tracking
    from ablate.trainer import train

    _notify(hooks.on_trial_start, trial, index, total)
    parent = tracking.MLflowStudy(uri, study.name)
    s = trial.spec
    tracker = parent.trial_tracker(
        trial.id,
        run_name=f"{trial.arm} | {s.model} | {s.template} | seed {s.seed}",
        tags=trial_tags(study, trial),
    )
    tracker.log_dict(trial.spec.as_dict(), "config.json")
    try:
        result = train(
            s, tracker=tracker, run_dir=study_dir / "trials" / trial.id, progress=hooks.on_step
        )
    except Exception as exc:  # a crashed trial must not take the study down
        message = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        _close_failed(tracker, message)
        out = _outcome(trial, "failed", message)
    else:
        # a diverged trial is a result (deterministic: rerunning would diverge again)
        tracker.close("FAILED" if result.outcome == "failed" else "FINISHED")
        out = _outcome(trial, result.outcome, result.message, result.final_eval)
    _notify(hooks.on_trial_end, out)
    return out


def _close_failed(tracker, message: str) -> None:
    """Record a crashed trial; if the tracking store itself is what failed, say so and go on."""
    import warnings

    try:
        tracker.set_tags({"outcome": "failed", "outcome_message": message[:4000]})
        tracker.close("FAILED")
    except Exception as exc:  # the store is down too: the run stays RUNNING, a rerun resumes it
        warnings.warn(f"could not record the failed trial in MLflow: {exc}", stacklevel=2)


def _worker_init(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def _run_in_worker(args: tuple) -> TrialOutcome:
    study, trial, uri, study_dir = args
    return run_trial(study, trial, uri, study_dir, RunHooks(), 0, 1)


def _run_parallel(study, todo, uri, study_dir, workers, hooks) -> list[TrialOutcome]:
    """N processes, each with cores/N torch threads (two 1-thread runs beat one 2-thread run)."""
    import multiprocessing as mp

    threads = max(1, (os.cpu_count() or 1) // workers)
    ctx = mp.get_context("spawn")
    outcomes = []
    with ctx.Pool(workers, initializer=_worker_init, initargs=(threads,)) as pool:
        jobs = [(study, t, uri, study_dir) for t in todo]
        for i, out in enumerate(pool.imap_unordered(_run_in_worker, jobs)):
            outcomes.append(out)
            _notify(hooks.on_trial_end, out)
            _notify(hooks.on_trial_start, None, i + 1, len(todo))
    return outcomes


def passk_phase(study: Study, cache_dir: Path, progress=None):
    """Pass@k of every base model × template before RL, cached per model/template/task/n."""
    import pandas as pd

    from ablate.models import load_model, resolve_model_path
    from ablate.passk import passk_sweep
    from ablate.rollout.base import SamplingParams
    from ablate.rollout.hf import HFEngine

    p = study.passk
    frames = []
    # every model any trial starts from (extra cells included): gain vs base Pass@G needs them
    models = list(dict.fromkeys(model for _, model, _, _ in study.cells()))
    for model in models:
        for template in p.templates or study.templates:
            key = _passk_key(study, str(resolve_model_path(model)), template)
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


def summary_rows(runs, metric: str = "eval/pass_at_1") -> list[dict[str, Any]]:
    """Mean and range over seeds of a trial's final eval metric, per arm × model × template,
    from `tracking.load_runs` (so trials finished by earlier invocations count too)."""
    col = f"metrics.{metric}"
    if runs.empty or col not in runs:
        return []
    done = runs[(runs["status"] == "FINISHED") & runs[col].notna()]
    keys = ["tags.ablate.arm", "tags.ablate.model", "tags.ablate.template"]
    rows = []
    for (a, m, t), g in done.groupby(keys, sort=False):
        v = g[col].astype(float)
        rows.append(
            {
                "arm": a,
                "model": m,
                "template": t,
                "n": len(v),
                "mean": v.mean(),
                "min": v.min(),
                "max": v.max(),
            }
        )
    return rows
