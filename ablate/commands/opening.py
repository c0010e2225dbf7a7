"""The first lines of `ablate run` and `ablate demo`: what the study will run and about how long
it will take, printed before the first trial. A user who waits minutes for the first line
learns nothing; the measured time to go follows once the first steps ran (`study_progress`)."""

from __future__ import annotations

from typing import Any

from ablate.commands.study_progress import duration_text


def opening_lines(study: Any, workers: int) -> list[str]:
    """`quickstart: 38 trials in 10 cells …`, the Pass@G phase, the budget of one trial and the
    estimated time from `ablate plan`'s cost model (the trials only: the Pass@G phase is short)."""
    from ablate.report.stats.plan import (
        DEFAULT_EVAL_SAMPLE_SECONDS,
        DEFAULT_STEP_SECONDS,
        default_cost,
    )
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
    if problems is not None:
        cost = default_cost(study, workers)
        cpu = cost.trial_seconds(problems, spec.n_samples) * len(trials)
        lines.append(
            f"estimated: about {duration_text(cpu / max(1, workers))} of trials with "
            f"{_n(workers, 'worker')} ({duration_text(cpu)} of CPU at {DEFAULT_STEP_SECONDS} s per "
            f"step of 8 × 8 × 80 tokens and {DEFAULT_EVAL_SAMPLE_SECONDS * 1e3:g} ms per eval "
            "sample, `ablate plan`'s rates on a 2-core CPU); measured from the first steps on"
        )
    return lines


def _extra(cells: int, study: Any) -> str:
    main = len(study.arms) * len(study.base_models) * len(study.templates)
    return f", + {_n(cells - main, 'extra cell')}" if cells > main else ""


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def _count(problems: int | None) -> str:
    return "?" if problems is None else f"{problems:,}"
