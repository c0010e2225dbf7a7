"""The first lines of `ablate run` and `ablate demo`: what the study will run and about how long
it will take, printed before the first trial. A user who waits minutes for the first line
learns nothing; the measured time to go follows once the first steps ran (`study_progress`)."""

from __future__ import annotations

from typing import Any

from ablate.commands.study_progress import duration_text


def opening_lines(study: Any, workers: int) -> list[str]:
    """`quickstart: 38 trials in 10 cells …`, the Pass@G phase, the tuning phase, the budget of
    one trial, the eval-recipe phase and the estimated time from `ablate plan`'s cost model (the
    tuning phase, the trials and the eval recipes: the Pass@G phase is short)."""
    from ablate.study.design_checks import eval_problem_count

    trials = study.trials()
    cells = {(t.arm, t.spec.model, t.spec.template) for t in trials}
    b, spec = study.budget, study.eval
    problems = eval_problem_count(study)
    lines = [
        f"{study.name}: {_n(len(trials), 'trial')} in {_n(len(cells), 'cell')} "
        f"({_n(len(study.arms), 'arm')} × {_n(len(study.base_models), 'base model')} × "
        f"{_n(len(study.templates), 'template')} at {_n(len(study.seeds), 'seed')}"
        f"{_extra(len(cells), study)})",
        f"each trial: up to {b.max_steps:,} steps of {b.prompts_per_step} prompts × "
        f"{b.group_size} samples × up to {b.max_new_tokens} new tokens, lr {study.optim.lr:g}; "
        f"evals of {_count(problems)} problems × {_n(spec.n_samples, 'sample')}",
    ]
    if study.passk is not None:
        templates = study.passk.templates or study.templates
        models = {t.spec.model for t in trials}
        lines.append(
            f"first the Pass@G phase: {_n(len(models), 'base model')} × "
            f"{_n(len(templates), 'template')}, {study.passk.max_problems} problems × "
            f"{_n(study.passk.n, 'sample')} each"
        )
    lines += _phase_lines(study, len(trials), problems)
    if problems is not None:
        lines.append(_estimate(study, workers, len(trials), problems))
    return lines


def _phase_lines(study: Any, trials: int, problems: int | None) -> list[str]:
    """The tuning phase before the trials and the eval-recipe phase after them, if declared."""
    out, tune, n = [], study.tune, study.eval.n_samples
    if tune is not None:
        arms = sum(a.replicate_of is None for a in study.arms)
        out.append(
            f"before the trials, the tuning phase: {_n(arms, 'arm')} × {_n(tune.trials, 'trial')}"
            f" × {_n(len(tune.seeds), 'seed')} = {_n(arms * tune.runs_per_arm, 'run')} of "
            f"{tune.steps:,} steps, each scored on {tune.selection_problems:,} selection "
            f"problems × {_n(n, 'sample')} (tuning {', '.join(tune.params)})"
        )
    if study.eval.robustness is not None:
        recipes = len(_recipes(study))
        out.append(
            f"after the trials, the eval-recipe phase: {_n(trials, 'final checkpoint')} × "
            f"{_n(recipes, 'recipe')}, {_count(problems)} problems × {_n(n, 'sample')} each"
        )
    return out


def _estimate(study: Any, workers: int, trials: int, problems: int) -> str:
    """`estimated: about …` from `ablate plan`'s default cost model: the trials on `workers`
    processes, the tuning and eval-recipe phases (each run by the runner itself) added."""
    from ablate.report.stats.plan import (
        DEFAULT_EVAL_SAMPLE_SECONDS,
        DEFAULT_STEP_SECONDS,
        default_cost,
        tuning_seconds,
    )

    cost = default_cost(study, workers)
    n = study.eval.n_samples
    cpu = cost.trial_seconds(problems, n) * trials
    tuning = tuning_seconds(study, cost)
    recipes = sum(r.max_new_tokens for r in _recipes(study)) / study.budget.max_new_tokens
    recipes *= trials * problems * n * cost.eval_sample_seconds
    phases = ["tuning"] * bool(tuning) + ["trials"] + ["eval recipes"] * bool(recipes)
    what = " and ".join(phases) if len(phases) < 3 else "tuning, trials and eval recipes"
    parts = f", {duration_text(tuning)} of tuning" if tuning else ""
    parts += f", {duration_text(recipes)} of eval recipes" if recipes else ""
    parts = f" in trials{parts}," if parts else ""
    return (
        f"estimated: about {duration_text(tuning + cpu / max(1, workers) + recipes)} of {what} "
        f"with {_n(workers, 'worker')} ({duration_text(cpu)} of CPU{parts} at "
        f"{DEFAULT_STEP_SECONDS} s per step of 8 × 8 × 80 tokens and "
        f"{DEFAULT_EVAL_SAMPLE_SECONDS * 1e3:g} ms per eval sample, `ablate plan`'s rates on a "
        "2-core CPU); measured from the first steps on"
    )


def _recipes(study: Any) -> list[Any]:
    """The eval recipes every final checkpoint is evaluated under (none without them)."""
    recipes = study.eval.robustness
    if recipes is None:
        return []
    return recipes.expand(study.templates[0], study.eval.temperature, study.budget.max_new_tokens)


def _extra(cells: int, study: Any) -> str:
    main = len(study.arms) * len(study.base_models) * len(study.templates)
    return f", + {_n(cells - main, 'extra cell')}" if cells > main else ""


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def _count(problems: int | None) -> str:
    return "?" if problems is None else f"{problems:,}"
