"""`ablate tune`: an Optuna search over a study's declared space (`Study.search`).

Every tune trial is the study's reference arm on its first base model, template and seed, with the
sampled values applied to the Algorithm or the Optim. TPE (seeded) proposes values; MedianPruner
stops a trial whose eval pass@1 at a periodic eval (`EvalSpec.every`) falls below the median of
earlier trials at that step. Pruning exists only here: `ablate run` compares arms at a matched
budget and never stops one early. Each tune trial is a trial run of the results-store study
`<study>-tune`; the Optuna study (same name) lives in `--storage`, by default a sqlite file in the
results folder, so running `ablate tune` again continues the same search.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ablate import tracking
from ablate.base.errors import StudyError, TrialError
from ablate.base.store import tags as tag
from ablate.factors.spec import TrialSpec
from ablate.study.study import SearchSpace, Study, Trial
from ablate.trial import train  # a module attribute, so tests can stub the trainer

if TYPE_CHECKING:
    import optuna

METRIC = "eval/pass_at_1"
TrialCallback = Callable[[int, str, float | None, dict[str, Any]], None]


@dataclass
class TuneResult:
    study: str
    best_params: dict[str, Any]
    best_value: float
    trials: list[dict[str, Any]] = field(default_factory=list)
    """number, state (COMPLETE | PRUNED | FAIL), value, params of every trial, this run's or not."""


def tune(
    study: Study,
    *,
    n_trials: int = 20,
    storage: str | None = None,
    results_dir: str | Path = "results",
    tracking_uri: str | None = None,
    seed: int = 0,
    startup_trials: int = 5,
    on_trial: TrialCallback | None = None,
) -> TuneResult:
    """Run `n_trials` more trials of the search; returns the best parameters so far."""
    import optuna

    if not study.search:
        raise StudyError(
            f"study {study.name!r} declares no search space: add "
            "search={'lr': SearchSpace(low=1e-5, high=1e-4, log=True, target='optim')}"
        )
    root = Path(results_dir).resolve()
    store = tracking.open_store(tracking_uri or tracking.default_uri(root))
    store.init()
    parent = store.open_study(f"{study.name}-tune")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    search = optuna.create_study(
        storage=storage or f"sqlite:///{root / 'optuna.db'}",
        study_name=f"{study.name}-tune",
        direction="maximize",
        load_if_exists=True,
        sampler=optuna.samplers.TPESampler(seed=seed),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=startup_trials),
    )
    # Trial numbers restart if the Optuna storage is lost while the results store is kept: this
    # token keeps the store's trial ids unique anyway.
    if "ablate_tune_token" not in search.user_attrs:
        search.set_user_attr("ablate_tune_token", uuid.uuid4().hex[:8])
    objective = _objective(study, base_trial(study), parent, search.user_attrs["ablate_tune_token"])
    callbacks = (
        []
        if on_trial is None
        else [lambda _, t: on_trial(t.number, t.state.name, t.value, t.params)]
    )
    # A failing trial (bad combination, crash) is recorded as FAIL; the search goes on.
    search.optimize(objective, n_trials=n_trials, catch=(Exception,), callbacks=callbacks)
    parent.close("FINISHED")
    return _result(study, search)


def base_trial(study: Study) -> Trial:
    """The reference arm × first base model × first template × first seed."""
    return next(
        t
        for t in study.trials()
        if t.arm == study.reference_arm
        and t.spec.model == study.base_models[0]
        and t.spec.template == study.templates[0]
        and t.spec.seed == study.seeds[0]
    )


def sample(trial: optuna.Trial, space: Mapping[str, SearchSpace]) -> dict[str, Any]:
    """One value per dimension: categorical, int (both bounds ints) or float, log if asked."""
    values: dict[str, Any] = {}
    for name, dim in space.items():
        if dim.choices is not None:
            values[name] = trial.suggest_categorical(name, list(dim.choices))
        elif isinstance(dim.low, int) and isinstance(dim.high, int):
            values[name] = trial.suggest_int(name, dim.low, dim.high, log=dim.log)
        else:
            values[name] = trial.suggest_float(name, dim.low, dim.high, log=dim.log)
    return values


def apply(
    spec: TrialSpec, space: Mapping[str, SearchSpace], values: Mapping[str, Any], study_name: str
) -> TrialSpec:
    """`spec` with the sampled values replaced in its Algorithm and Optim (validated again)."""
    by_target = {"algorithm": {}, "optim": {}}
    for name, value in values.items():
        by_target[space[name].target][name] = value
    return dataclasses.replace(
        spec,
        study=study_name,
        algorithm=dataclasses.replace(spec.algorithm, **by_target["algorithm"]),
        optim=dataclasses.replace(spec.optim, **by_target["optim"]),
    )


def _objective(study: Study, base: Trial, parent, token: str):
    import optuna

    def objective(trial: optuna.Trial) -> float:
        values = sample(trial, study.search)
        spec = apply(base.spec, study.search, values, f"{study.name}-tune")
        label = ", ".join(
            f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items()
        )
        tracker = parent.trial_tracker(
            f"{spec.id}-{token}-{trial.number}",
            run_name=f"tune {trial.number}: {label}",
            tags={
                tag.ARM: base.arm,
                tag.SEED: str(spec.seed),
                tag.MODEL: spec.model,
                tag.TEMPLATE: spec.template,
                f"{tag.TUNE}number": str(trial.number),
                **{f"{tag.TUNE}{k}": str(v) for k, v in values.items()},
            },
        )
        tracker.log_dict(spec.as_dict(), "config.json")
        try:
            result = train(spec, tracker=tracker, run_dir=None, progress=_pruning(trial))
        except optuna.TrialPruned:
            tracker.set_tags({tag.OUTCOME: "pruned"})
            tracker.close("KILLED")
            raise
        except Exception as exc:
            tracker.set_tags({tag.OUTCOME: "failed", tag.OUTCOME_MESSAGE: str(exc)[:4000]})
            tracker.close("FAILED")
            raise
        tracker.close("FAILED" if result.outcome == "failed" else "FINISHED")
        if result.outcome != "finished" or METRIC not in result.final_eval:
            raise TrialError(f"tune trial {trial.number} {result.outcome}: {result.message}")
        return result.final_eval[METRIC]

    return objective


def _pruning(trial: optuna.Trial) -> Callable[[int, int, dict[str, float]], None]:
    """The trainer's progress callback: report each periodic eval, stop a trial below the
    median (the trainer lets the exception through; `objective` records it)."""
    import optuna

    def progress(step: int, total: int, metrics: dict[str, float]) -> None:
        if METRIC in metrics:
            trial.report(metrics[METRIC], step)
            if trial.should_prune():
                raise optuna.TrialPruned(f"{METRIC}={metrics[METRIC]:.3f} at step {step}")

    return progress


def _result(study: Study, search: optuna.Study) -> TuneResult:
    rows = [
        {"number": t.number, "state": t.state.name, "value": t.value, "params": t.params}
        for t in search.get_trials(deepcopy=False)
    ]
    try:
        best = search.best_trial
    except ValueError:  # no trial completed
        raise StudyError(
            f"tune {study.name!r}: no trial completed ({len(rows)} tried); "
            "see the FAILED runs in the results store"
        ) from None
    return TuneResult(f"{study.name}-tune", dict(best.params), float(best.value), rows)
