"""The eval-recipe phase of a study with `EvalSpec(robustness=Recipes(...))`: after its trials,
every finished trial's final checkpoint is evaluated again under each declared recipe (template,
temperature, token limit, decode seed: `Recipes.expand`), never retrained.

Each (trial, recipe) result is one small file, `<results>/<study>/recipes/<trial id>/<key>.json`
(per-problem pass rates), written atomically once: a rerun evaluates only the missing ones (two
runners racing write the same numbers: the evaluation is seeded). All of them are gathered into
`<results>/<study>/recipes.csv` (`COLUMNS`) for the report.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pandas as pd

from ablate import tracking
from ablate.base import durable
from ablate.base.devices import autocast
from ablate.base.seeding import derive_seed
from ablate.factors.eval_spec import Recipe
from ablate.stages.checkpoint import load_latest
from ablate.study.study import Study, Trial
from ablate.study.trial_run import RunHooks, notify
from ablate.study.tuning import RECIPES_FILE
from ablate.tasks.templates import get_template
from ablate.trial.evaluation import evaluate
from ablate.trial.setup import setup_trial

FILE = RECIPES_FILE
COLUMNS = ("trial_id", "arm", "model", "template", "seed", "recipe", "problem_id", "rate")


def recipes_of(study: Study, trial: Trial) -> list[Recipe]:
    s = trial.spec
    recipes = study.eval.robustness
    return recipes.expand(s.template, s.eval.temperature, s.budget.max_new_tokens)


def evaluate_recipes(
    study: Study, trials: list[Trial], study_dir: Path, uri: str, hooks: RunHooks | None = None
) -> Path:
    """Evaluate every finished trial of `trials` under every recipe not yet evaluated; the path
    of the gathered table."""
    notify((hooks or RunHooks()).on_phase, "eval recipes")
    runs = tracking.open_store(uri).runs(study.name).runs
    finished = set(runs[(runs["status"] == "FINISHED") & (runs["outcome"] == "finished")].trial_id)
    rows = []
    for trial in trials:
        if trial.id not in finished:
            continue
        folder = study_dir / "recipes" / trial.id
        missing = [r for r in recipes_of(study, trial) if not _file(folder, r).is_file()]
        if missing:
            _evaluate_checkpoint(trial, study_dir / "trials" / trial.id, folder, missing)
        rows += _rows(trial, folder, recipes_of(study, trial))
    path = study_dir / FILE
    durable.write_atomic(path, _csv(rows))
    return path


def _file(folder: Path, recipe: Recipe) -> Path:
    key = hashlib.sha256(recipe.label.encode()).hexdigest()[:12]
    return folder / f"{key}.json"


def _evaluate_checkpoint(trial: Trial, run_dir: Path, folder: Path, recipes: list[Recipe]) -> None:
    """The trial's final checkpoint evaluated under `recipes`, each result written as it comes."""
    spec = trial.spec
    s = setup_trial(spec)
    saved = load_latest(  # the engine too: a stale sampler evaluates as the trial's last eval did
        run_dir,
        model=s.model,
        optimizer=s.optimizer,
        scheduler=s.scheduler,
        estimator=s.estimator,
        engine=s.engine_with_state,
    )
    if saved is None:  # no checkpoint kept (trained elsewhere): nothing to re-evaluate
        return
    s.model.eval()
    for recipe in recipes:
        eval_spec = dataclasses.replace(
            spec.eval, temperature=recipe.temperature, selection_problems=0, robustness=None
        )
        seed = spec.rng_seed
        if recipe.decode_seed:
            seed = derive_seed(spec.rng_seed, "recipe", str(recipe.decode_seed)) % 2**31
        with autocast(s.device, s.precision):
            _, records = evaluate(
                s.engine,
                s.task,
                get_template(recipe.template),
                eval_spec,
                max_new_tokens=recipe.max_new_tokens,
                seed=seed,
            )
        rates: dict[str, list[float]] = {}
        for r in records:
            rates.setdefault(r["problem_id"], []).append(float(r["correct"]))
        result = {"recipe": recipe.label, "rates": {p: sum(v) / len(v) for p, v in rates.items()}}
        durable.write_atomic(_file(folder, recipe), json.dumps(result))


def _rows(trial: Trial, folder: Path, recipes: list[Recipe]) -> list[tuple]:
    s, rows = trial.spec, []
    for recipe in recipes:
        path = _file(folder, recipe)
        if not path.is_file():
            continue
        rates = json.loads(path.read_text())["rates"]
        cell = (trial.id, trial.arm, s.model, s.template, s.seed, recipe.label)
        rows += [(*cell, problem, rate) for problem, rate in rates.items()]
    return rows


def _csv(rows: list[tuple]) -> str:
    return pd.DataFrame(rows, columns=list(COLUMNS)).to_csv(index=False)
