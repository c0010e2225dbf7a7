"""The eval-recipe phase of a study with `EvalSpec(robustness=Recipes(...))`: after its trials,
every finished trial's final checkpoint is evaluated again under each declared recipe (template,
temperature, token limit, decode seed: `Recipes.expand`), never retrained.

Each (trial, recipe) result is one small file, `<results>/<study>/recipes/<trial id>/<key>.json`
(per-problem pass rates), written atomically once: a rerun evaluates only the missing ones (two
runners racing write the same numbers: the evaluation is seeded); one that is damaged (cut
short) is a cache: measured again, with a warning naming it. All of them are gathered into
`<results>/<study>/recipes.csv` (`COLUMNS`) for the report. A final checkpoint that is damaged,
or missing so that an older one is the newest, stops the phase in one line naming it: an older
checkpoint would give other numbers, and a finished trial is never trained again.
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
from ablate.base.errors import StudyError
from ablate.base.seeding import derive_seed
from ablate.factors.eval_spec import Recipe
from ablate.stages.checkpoint import CorruptCheckpoint, checkpoint_dirs, load_newest
from ablate.study.study import Study, Trial
from ablate.study.trial_run import RunHooks, notify
from ablate.study.tuning import RECIPES_FILE
from ablate.tasks.templates import get_template
from ablate.trial.evaluation import evaluate
from ablate.trial.loop import budget_spent
from ablate.trial.setup import TrainState, setup_trial

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
    of the gathered table. A final checkpoint that is damaged or missing (so that another one
    would stand in for it) stops the phase in one line naming it, after the other trials."""
    notify((hooks or RunHooks()).on_phase, "eval recipes")
    runs = tracking.open_store(uri).runs(study.name).runs
    finished = set(runs[(runs["status"] == "FINISHED") & (runs["outcome"] == "finished")].trial_id)
    rows, problems = [], []
    for trial in trials:
        if trial.id not in finished:
            continue
        try:
            rows += _trial_rows(study, trial, study_dir)
        except StudyError as exc:
            problems.append(str(exc))
    if problems:
        raise StudyError("; ".join(problems))
    path = study_dir / FILE
    durable.write_atomic(path, _csv(rows))
    return path


def _file(folder: Path, recipe: Recipe) -> Path:
    key = hashlib.sha256(recipe.label.encode()).hexdigest()[:12]
    return folder / f"{key}.json"


def _trial_rows(study: Study, trial: Trial, study_dir: Path) -> list[tuple]:
    """The trial's rows under every recipe: its cached results, the others measured now."""
    folder, recipes = study_dir / "recipes" / trial.id, recipes_of(study, trial)
    rates = {r.label: _cached(_file(folder, r), r) for r in recipes}
    if missing := [r for r in recipes if rates[r.label] is None]:
        rates |= _evaluate_checkpoint(trial, study_dir / "trials" / trial.id, folder, missing)
    s, rows = trial.spec, []
    for recipe in recipes:
        cell = (trial.id, trial.arm, s.model, s.template, s.seed, recipe.label)
        rows += [(*cell, problem, rate) for problem, rate in (rates[recipe.label] or {}).items()]
    return rows


def _cached(path: Path, recipe: Recipe) -> dict[str, float] | None:
    """The per-problem rates cached in `path`; None when there are none, or when the file is
    damaged (then with a warning naming it: it is measured again)."""

    def parse(p: Path) -> dict[str, float]:
        found = json.loads(p.read_text())
        if found["recipe"] != recipe.label:
            raise ValueError(f"holds recipe {found['recipe']!r}, not {recipe.label!r}")
        rates = {str(k): float(v) for k, v in found["rates"].items()}
        if not all(0.0 <= v <= 1.0 for v in rates.values()):
            raise ValueError("a rate outside [0, 1]")
        return rates

    return durable.read_valid(path, parse, "it is measured again from the final checkpoint")


def _evaluate_checkpoint(
    trial: Trial, run_dir: Path, folder: Path, recipes: list[Recipe]
) -> dict[str, dict[str, float]]:
    """The trial's final checkpoint evaluated under `recipes`, each result written as it comes;
    recipe label -> per-problem rates (none without checkpoints: trained on another machine)."""
    spec = trial.spec
    s = setup_trial(spec)
    if not _load_final(trial, run_dir, s):
        if damaged := [str(_file(folder, r)) for r in recipes if _file(folder, r).exists()]:
            raise StudyError(
                f"{damaged[0]} is damaged and trial {trial.id}'s final checkpoint to measure "
                f"it again is not in {run_dir}: move it aside (its recipe is then left out)"
            )
        return {}
    s.model.eval()
    measured = {}
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
        measured[recipe.label] = {p: sum(v) / len(v) for p, v in rates.items()}
        result = {"recipe": recipe.label, "rates": measured[recipe.label]}
        durable.write_atomic(_file(folder, recipe), json.dumps(result))
    return measured


def _load_final(trial: Trial, run_dir: Path, s) -> bool:
    """Restore the trial's final checkpoint into its setup `s` (the engine too: a stale sampler
    evaluates as the trial's last eval did); False when it kept none (trained elsewhere). A
    damaged or missing final checkpoint is a StudyError naming it: an older one would give
    other numbers, and a finished trial is never trained again."""
    fix = "restore it from a copy, or run the study into a fresh --results folder"
    what = f"trial {trial.id}'s final checkpoint, which the recipe phase evaluates"
    try:
        saved = load_newest(
            run_dir,
            model=s.model,
            optimizer=s.optimizer,
            scheduler=s.scheduler,
            estimator=s.estimator,
            engine=s.engine_with_state,
        )
    except CorruptCheckpoint as exc:
        raise StudyError(f"{what}, is damaged ({exc}): {fix}") from None
    if saved is None:
        return False
    folder = checkpoint_dirs(run_dir)[0]
    owner = saved.pop("trial_id", None)
    if owner != trial.id or not budget_spent(trial.spec, TrainState.from_dict(saved)):
        raise StudyError(
            f"{folder} is not {what} (it holds step {saved.get('step')}"
            f"{'' if owner == trial.id else ' of another trial'}): the final one is missing; {fix}"
        )
    return True


def _csv(rows: list[tuple]) -> str:
    return pd.DataFrame(rows, columns=list(COLUMNS)).to_csv(index=False)
