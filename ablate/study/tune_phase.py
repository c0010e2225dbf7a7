"""The tuning phase of a study with `tune=TuneSpec(...)` (`ablate.study.tuning`): every arm (an A/A
replicate takes its twin's setting) gets `trials` settings proposed by a TPE sampler pinned by
`sampler_seed`, each trained `steps` steps at every tuning seed on the task with its selection
split held out, and scored by mean pass@1 there; the best is the arm's chosen setting. No trial is
pruned: every arm spends exactly the declared budget.

Tuning trials are trials: each runs through `run_trial` (its lease, its run of the results
store `<study>-tune`, kept in the study's MLflow experiment; resumed from its checkpoint when
killed), under an id of its spec and its number. Resuming is a replay: the sampler, seeded the
same and told the same scores (a FINISHED trial's is read back from the store, never retrained),
proposes the same settings, so every tuning trial runs exactly once. The proposals and scores go
to `<results>/<study>/tuning.csv` for the report (`COLUMNS`).
"""

from __future__ import annotations

import dataclasses
import statistics
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ablate import tracking
from ablate.base import durable
from ablate.base.errors import StudyError
from ablate.base.store import tags as tag
from ablate.factors.spec import TrialSpec
from ablate.study.study import Study, Trial
from ablate.study.trial_run import LEASED_ELSEWHERE, RunHooks, notify, run_trial
from ablate.study.tuning import COLUMNS, FILE, TuneSpec, tuned, tuning_spec

#: A tuning trial's score: pass@1 at its final eval, which reads its selection split.
METRIC = "eval/pass_at_1"


@dataclass(frozen=True)
class TuningTrial(Trial):
    """A tuning trial: its id is its spec's and its number's (two proposals of the same values
    are two trials, so every arm trains exactly `trials` settings)."""

    number: int = 0

    @property
    def id(self) -> str:
        return f"{self.spec.id}-t{self.number}"


@dataclass
class _Context:
    study: Study  # the tuning trials' study: `<study>-tune`
    experiment: str
    uri: str
    folder: Path
    hooks: RunHooks
    total: int
    done: int = 0
    finished: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (run, outcome)


def tune_arms(
    study: Study, trials: list[Trial], root: Path, uri: str, hooks: RunHooks | None = None
) -> dict[str, dict[str, float]]:
    """Tune every arm of `study` (its `trials` give each arm's spec); arm -> chosen values."""
    tune: TuneSpec = study.tune
    hooks = hooks or RunHooks()
    notify(hooks.on_phase, "tuning")
    name = f"{study.name}-tune"
    store = tracking.open_store(uri)
    store.open_study(name, experiment=study.name)  # beside the study's own runs
    with warnings.catch_warnings():  # the study's warnings were shown when it loaded
        warnings.simplefilter("ignore")
        runner = _replace(study, name=name)
    tuned_arms = [a.name for a in study.arms if a.replicate_of is None]
    ctx = _Context(runner, study.name, uri, root / name, hooks, len(tuned_arms) * tune.runs_per_arm)
    ctx.finished = _finished(store, name)
    chosen: dict[str, dict[str, float]] = {}
    rows: list[dict[str, Any]] = []
    for arm in tuned_arms:
        base = next(t.spec for t in trials if t.arm == arm)
        chosen[arm], arm_rows = _tune_arm(ctx, arm, base, tune)
        rows += arm_rows
    for a in study.arms:
        if a.replicate_of is not None:
            chosen[a.name] = chosen[a.replicate_of]
    store.open_study(name, experiment=study.name).close("FINISHED")
    write_table(root / study.name / FILE, rows, list(tune.params))
    return chosen


def _replace(study: Study, **changes: Any) -> Study:
    return dataclasses.replace(study, tune=None, passk=None, launch=None, findings=(), **changes)


def _tune_arm(ctx: _Context, arm: str, base: TrialSpec, tune: TuneSpec):
    """The arm's `tune.trials` settings in order, each told its score; (best values, rows)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    startup = min(10, max(1, tune.trials // 2))
    sampler = optuna.samplers.TPESampler(seed=tune.sampler_seed, n_startup_trials=startup)
    search = optuna.create_study(direction="maximize", sampler=sampler)
    space = {
        n: optuna.distributions.FloatDistribution(r.low, r.high, log=r.log)
        for n, r in tune.params.items()
    }
    rows = []
    for number in range(tune.trials):
        proposal = search.ask(space)
        values = dict(proposal.params)
        specs = [tuned(tuning_spec(base, tune, ctx.experiment, s), values) for s in tune.seeds]
        scores = [_score(ctx, TuningTrial(arm, spec, number), values) for spec in specs]
        if any(s is None for s in scores):
            search.tell(proposal, state=optuna.trial.TrialState.FAIL)
            score, state = float("nan"), "failed"
        else:
            score, state = statistics.fmean(scores), "finished"
            search.tell(proposal, score)
        rows.append({"arm": arm, "number": number, "score": score, "state": state, **values})
    try:
        best = search.best_trial
    except ValueError:
        raise StudyError(f"tune: no tuning trial of arm {arm!r} finished") from None
    for row in rows:
        row["chosen"] = row["number"] == best.number
    return dict(best.params), rows


def _score(ctx: _Context, trial: TuningTrial, values: Mapping[str, float]) -> float | None:
    """The trial's selection pass@1, trained here or read back when FINISHED; 0 for a diverged
    trial (no worse score exists), None for a failed one."""
    labels = {f"{tag.TUNE}number": str(trial.number)}
    labels |= {f"{tag.TUNE}{k}": f"{v:.6g}" for k, v in values.items()}
    if trial.id not in ctx.finished:
        out = run_trial(
            ctx.study,
            trial,
            ctx.uri,
            ctx.folder,
            ctx.hooks,
            ctx.done,
            ctx.total,
            experiment=ctx.experiment,
            tags=labels,
        )
        ctx.done += 1
        if out.message.startswith(LEASED_ELSEWHERE):
            raise StudyError(f"tune: {trial.arm}'s tuning trial {trial.id} is {out.message}")
        if out.outcome == "finished":
            return float(out.final_eval[METRIC])
        if out.outcome != "skipped":  # skipped: another runner finished it just now
            return 0.0 if out.outcome == "diverged" else None
        ctx.finished = _finished(tracking.open_store(ctx.uri), ctx.study.name)
    else:
        ctx.done += 1
    run_id, outcome = ctx.finished[trial.id]
    if outcome == "diverged":
        return 0.0
    history = tracking.open_store(ctx.uri).metric_history(run_id, METRIC)
    return float(history[-1][1]) if history else None


def _finished(store, name: str) -> dict[str, tuple[str, str]]:
    """trial id -> (run id, outcome) of the FINISHED tuning trials of `name`."""
    table = store.runs(name)
    if table.empty:
        return {}
    runs = table.runs[table.runs["status"] == "FINISHED"]
    return {r.trial_id: (r.run_id, str(r.outcome)) for r in runs.itertuples()}


def write_table(path: Path, rows: list[dict[str, Any]], params: list[str]) -> None:
    import pandas as pd

    frame = pd.DataFrame(rows, columns=[*COLUMNS, *params])
    durable.write_atomic(path, frame.to_csv(index=False))


def chosen_settings(study: Study, results_dir: str | Path) -> dict[str, dict[str, float]]:
    """arm -> its chosen values, read back from `<results>/<study>/tuning.csv` (an A/A replicate:
    its twin's); empty for a study without tuning. What runs a study's trials without running
    its tuning phase (a Slurm array task, `ablate worker`, `ablate status`) trains and finds
    them at these values; StudyError when the tuning phase has not finished, StoreError naming
    the file when it is damaged (not text, not a table, a chosen value missing or out of range)."""
    if study.tune is None:
        return {}
    path = Path(results_dir).resolve() / study.name / FILE
    fix = f"tune it first: `ablate run <study file> --tune-only --results {results_dir}`"
    if not path.exists():
        raise StudyError(f"study {study.name!r} tunes its arms and has no {path} yet: {fix}")
    params = study.tune.params
    chosen = durable.read_whole(
        path,
        lambda text: _chosen_rows(text, params),
        f"move it aside and {fix} (its trials are read back, not trained again)",
    )
    for a in study.arms:
        if a.replicate_of is not None and a.replicate_of in chosen:
            chosen[a.name] = chosen[a.replicate_of]
    if missing := [a.name for a in study.arms if a.name not in chosen]:
        raise StudyError(f"{path} has no chosen setting for {', '.join(missing)}: {fix}")
    return chosen


def _chosen_rows(text: str, params: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """arm -> chosen values of a tuning.csv's text; ValueError saying what is wrong with it."""
    import csv
    import io
    import math

    try:
        rows = list(csv.DictReader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise ValueError(f"not a table: {exc}") from None
    if not rows or not {"arm", "chosen", *params} <= set(rows[0]):
        raise ValueError(f"no header of columns arm, chosen, {', '.join(params)}")
    chosen = {}
    for row in rows:
        if str(row.get("chosen")).lower() != "true":
            continue
        values = {}
        for name, dim in params.items():
            try:
                value = float(row[name])
            except (TypeError, ValueError):
                raise ValueError(f"{row['arm']}'s chosen {name}={row[name]!r}") from None
            slack = 1e-9 * max(abs(dim.low), abs(dim.high))  # what the text's digits round
            if not (math.isfinite(value) and dim.low - slack <= value <= dim.high + slack):
                raise ValueError(
                    f"{row['arm']}'s chosen {name}={value:g} is outside its range "
                    f"[{dim.low:g}, {dim.high:g}]"
                )
            values[name] = value
        chosen[row["arm"]] = values
    return chosen
