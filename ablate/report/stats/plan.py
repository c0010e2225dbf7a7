"""`ablate plan`: seeds × eval problems × samples per problem for a compute budget and an
effect of interest, from a pilot or from defaults.

A pilot's per-(seed, problem) pass rates at each trial's final eval (a diverged trial counts 0
on every problem) give each primary contrast its variance components (`design.Components`), the
eval noise of the difference read from its paired per-sample outcomes (`pilot.py`: the arms of a
seed share their eval draws); its logged wall times give the cost of a training step and of one
eval sample. The search (`design.designs`) prices every design of the grid and judges it by its
MDE at Bonferroni alpha / m over the primary family, the seed term at its 80% upper confidence
bound. The recommended design's power is then checked by simulation, and each declared
control's detection probability at it stated (`plan_power`).

Without a pilot the defaults below stand in; they are rough, and each says where it comes from.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ablate.base.errors import ConfigError, StudyError
from ablate.report.stats import design, plan_power
from ablate.report.stats.design import Components, Cost, Design
from ablate.report.stats.inference import ALPHA, MIN_SEEDS
from ablate.report.stats.pilot import (  # noqa: F401 (the pilot's API, re-exported)
    Pilot,
    contrast_matrices,
    load_pilot,
    pilot_components,
    primary_family,
)
from ablate.report.stats.plan_power import PowerCheck
from ablate.study.controls import declared
from ablate.study.design_checks import eval_problem_count
from ablate.study.resources import STEP_SECONDS, STEP_TOKENS
from ablate.study.study import Study
from ablate.tasks import get_task

# Defaults without a pilot. Components of one contrast (arm − reference) on pass@1:
#: per-seed SD of an arm's final pass@1, pooled over arms (issue 28: `make demo`, 64 problems ×
#: 8 samples, seed SDs 0.009–0.038)
DEFAULT_ARM_SEED_SD = 0.030
#: the eval-sampling part of that SD at 64 problems × 8 samples (issue 28, same eval samples)
DEFAULT_EVAL_SD, DEFAULT_EVAL_SIZE = 0.020, 64 * 8
#: arm × problem interaction SD of a difference in pass rate: a guess (≈ 0.2 logit at p = 0.5,
#: below the 0.5–1.0 logit the issue's calibration scenarios stress)
DEFAULT_PROBLEM_SD = 0.05
#: seed × problem interaction SD of a difference in pass rate: a guess
DEFAULT_SP_SD = 0.10
# Cost, measured on this project's 2-core machine (1 torch thread, other jobs running):
# `ablate train --algo grpo --model rl_ready --steps 20 --eval-problems 256 --set
# eval.n_samples=8 --set minibatches=4 --set kl_coef=0` logged budget/wall_seconds 11.54 and
# ran 22.19 s between its run's start and end; the same with 5 steps, 64 problems × 2 samples:
# 2.99 s and 4.53 s. Eval = run − training: 10.65 s for 4096 samples, 1.54 s for 256.
#: seconds per RL step at 8 prompts × 8 completions × 80 new tokens (scaled by their product;
#: kept with the study's resource checks, which say an absurd budget's time before compute)
DEFAULT_STEP_SECONDS, DEFAULT_STEP_TOKENS = STEP_SECONDS, STEP_TOKENS
#: seconds per eval sample at 80 new tokens (the slope of the two runs; scaled by the limit)
DEFAULT_EVAL_SAMPLE_SECONDS, DEFAULT_EVAL_TOKENS = 0.0024, 80
#: mean completion length / max_new_tokens (rl_ready's eval: 41.6 of 80 tokens), for the
#: number of evals a token cadence adds
DEFAULT_LENGTH_FRACTION = 0.52
TABLE_ROWS = 5


def default_components() -> Components:
    """One contrast's components from the defaults above: the arms' training variances add
    (independent trajectories), and so do their per-sample variances (no pilot measures how much
    of it the shared eval draws cancel: the sum is the safe side)."""
    arm_sample_var = DEFAULT_EVAL_SD**2 * DEFAULT_EVAL_SIZE  # mean p(1 − p) of one arm
    return Components(
        seed_var=2 * (DEFAULT_ARM_SEED_SD**2 - DEFAULT_EVAL_SD**2),
        problem_var=DEFAULT_PROBLEM_SD**2,
        sp_var=DEFAULT_SP_SD**2,
        sample_var=2 * arm_sample_var,
    )


def eval_count(study: Study) -> float:
    """Evals per trial from the study's cadence: at the start, every `every` steps, at the
    token marks (generated tokens estimated at DEFAULT_LENGTH_FRACTION of the limit) and at the
    end. FLOP and log-spaced cadences are not counted (a pilot counts them)."""
    spec, b = study.eval, study.budget
    count = float(spec.at_start) + 1
    if spec.every:
        count += (b.max_steps - 1) // spec.every
    if spec.every_tokens:
        per_step = b.prompts_per_step * b.group_size * b.max_new_tokens * DEFAULT_LENGTH_FRACTION
        count += b.max_steps * per_step // spec.every_tokens
    return count


def _trial_counts(study: Study) -> tuple[int, int]:
    """(trials per seed of the main grid, trials outside it: extra cells at fixed seeds)."""
    per_seed = len(study.arms) * len(study.base_models) * len(study.templates)
    main = {(a.name, m, t) for a in study.arms for m in study.base_models for t in study.templates}
    main_seeds = set(study.seeds)
    fixed = [c for c in study.cells() if c[:3] not in main or c[3] not in main_seeds]
    return per_seed, len(fixed)


def default_cost(study: Study, workers: int = 1) -> Cost:
    """The measured defaults, scaled to the study's budget (step time with prompts × completions
    × new tokens, eval time per sample with the token limit) and its eval cadence."""
    b = study.budget
    tokens = b.prompts_per_step * b.group_size * b.max_new_tokens
    step = DEFAULT_STEP_SECONDS * tokens / DEFAULT_STEP_TOKENS
    sample = DEFAULT_EVAL_SAMPLE_SECONDS * b.max_new_tokens / DEFAULT_EVAL_TOKENS
    per_seed, fixed = _trial_counts(study)
    return Cost(b.max_steps * step, sample, eval_count(study), per_seed, fixed, workers)


def pilot_cost(pilot: Pilot, study: Study, workers: int = 1) -> Cost:
    """The pilot's median seconds per step (budget/wall_seconds over its steps) times the study's
    steps, and its median eval seconds per sample: (run wall time − training) over its evals ×
    problems × samples (so per-trial setup counts as eval time: an overestimate). Evals per
    trial: the pilot's when it ran the study's steps, else the study's cadence (`eval_count`);
    a missing measurement falls back to the defaults."""
    t = pilot.trials[pilot.trials["outcome"] == "finished"]
    fallback = default_cost(study, workers)
    step = (t["train_seconds"] / t["steps"].clip(lower=1)).median()
    eval_seconds = (t["run_seconds"] - t["train_seconds"]).clip(lower=0)
    sample = (eval_seconds / (t["evals"] * t["problems"] * pilot.samples)).median()
    same_length = t["steps"].median() == study.budget.max_steps
    return Cost(
        study.budget.max_steps * step if np.isfinite(step) else fallback.train_seconds,
        sample if np.isfinite(sample) and sample > 0 else fallback.eval_sample_seconds,
        float(t["evals"].median()) if same_length else fallback.evals,
        fallback.trials_per_seed,
        fallback.fixed_trials,
        workers,
    )


def eval_split_size(study: Study) -> int:

    return len(get_task(study.task, **dict(study.task_options)).problems("eval"))


@dataclass(frozen=True)
class Plan:
    effect: float
    budget_hours: float
    family: int  # m: contrasts in the primary family
    alpha: float  # per contrast: ALPHA / m
    cost: Cost
    best: Design | None
    table: list[Design]
    components: dict[str, Components]  # the pilot's point estimates (or the defaults)
    source: str
    untested: list[str] = field(default_factory=list)  # contrasts the pilot has no data for
    checks: list[PowerCheck] = field(default_factory=list)  # power at `best`: contrasts, controls
    own: Design | None = None  # the study's own design (its seeds, eval problems and samples)
    own_checks: list[PowerCheck] = field(default_factory=list)  # power at `own`


def tuning_seconds(study: Study, cost: Cost) -> float:
    """The tuning phase's seconds (0 without one): every arm but the A/A replicates × its
    `trials × seeds` runs of `steps` steps at the cost's seconds per step, each evaluated once on
    the selection split."""
    tune = study.tune
    if tune is None:
        return 0.0
    arms = sum(a.replicate_of is None for a in study.arms)
    step = cost.train_seconds / study.budget.max_steps
    evaluation = tune.selection_problems * study.eval.n_samples * cost.eval_sample_seconds
    return arms * tune.runs_per_arm * (tune.steps * step + evaluation)


def _components(study: Study, pilot: Pilot | None, workers: int):
    """(contrast components, control components, cost with the tuning phase, source)."""
    components, controls, cost, source = _measured(study, pilot, workers)
    return components, controls, replace(cost, fixed_seconds=tuning_seconds(study, cost)), source


def _measured(study: Study, pilot: Pilot | None, workers: int):
    if pilot is None:
        components = {"defaults (every contrast)": default_components()}
        return components, {}, default_cost(study, workers), "defaults (no pilot)"
    components = pilot_components(pilot, primary_family(study), study.reference_arm)
    if not components:
        raise StudyError(
            f"the pilot {pilot.name!r} has no contrast with 2 seeds in both arms: run at "
            f"least 2 (better {MIN_SEEDS}) seeds of the reference and another arm"
        )
    keys = [(c.arm, m, t) for c in declared(study) for m, t in _cells(study)]
    controls = pilot_components(pilot, keys, study.reference_arm)
    source = f"pilot {pilot.name!r} ({pilot.trials['seed'].nunique()} seeds, K = {pilot.samples})"
    return components, controls, pilot_cost(pilot, study, workers), source


def _checks(study, components, controls, at: Design, alpha, effect, studies) -> list[PowerCheck]:
    """Power at the design `at` of every contrast and declared control."""
    checks = plan_power.contrast_checks(components, at, effect, alpha, studies)
    worst = max(components.values(), key=lambda c: plan_power.variance_at(c, at))
    cells = _cells(study)
    return checks + plan_power.control_checks(declared(study), controls, worst, at, cells, studies)


def _cells(study: Study) -> list[tuple[str, str]]:
    return [(m, t) for m in study.base_models for t in study.templates]


def make_plan(
    study: Study,
    effect: float,
    budget_hours: float,
    pilot: Pilot | None = None,
    workers: int = 1,
    problems: tuple[int, ...] | None = None,
    studies: int = plan_power.STUDIES,
) -> Plan:
    """The recommended design and the best few (`design.frontier`) for `study`, with the power
    at the recommended design of every contrast and declared control, by formula and by
    `studies` simulated studies (0: by formula only)."""
    if not effect > 0:
        raise ConfigError(f"the effect to detect must be a Δ pass@1 > 0 (got {effect})")
    if workers < 1:
        raise ConfigError(f"workers={workers} must be >= 1")
    family = primary_family(study)
    if not family:
        raise StudyError(f"study {study.name!r} has no contrast with its reference to plan for")
    components, controls, cost, source = _components(study, pilot, workers)
    grid_j = problems or design.problem_grid(eval_split_size(study))
    cheapest = float(cost.hours(design.SEEDS[0], min(grid_j), min(design.SAMPLES)))
    if cheapest > budget_hours:
        raise ConfigError(
            f"--cpu-hours {budget_hours:g} is below the cheapest design ({design.SEEDS[0]} seeds, "
            f"{min(grid_j)} problems × {min(design.SAMPLES)} sample: {cheapest:.2f} h with "
            f"{workers} worker(s))"
        )
    alpha = ALPHA / len(family)
    grid = design.designs(list(components.values()), cost, alpha, grid_j)
    labels = {f"{a} · {m} · {t}" for a, m, t in family}
    best = design.recommend(grid, effect, budget_hours)
    checks = (
        [] if best is None else _checks(study, components, controls, best, alpha, effect, studies)
    )
    own = Design(
        len(study.seeds), eval_problem_count(study) or min(grid_j), study.eval.n_samples, 0.0, 0.0
    )
    own = replace(own, hours=float(cost.hours(own.seeds, own.problems, own.samples)))
    return Plan(
        effect=effect,
        budget_hours=budget_hours,
        family=len(family),
        alpha=alpha,
        cost=cost,
        best=best,
        table=design.frontier(grid, effect, budget_hours)[:TABLE_ROWS],
        components=components,
        source=source,
        untested=sorted(labels - set(components)) if pilot is not None else [],
        checks=checks,
        own=own,
        own_checks=_checks(study, components, controls, own, alpha, effect, studies),
    )


def tuning_line(study: Study, cost: Cost) -> str:
    """What the tuning phase costs, counted in every design's hours."""
    tune, arms = study.tune, sum(a.replicate_of is None for a in study.arms)
    hours = cost.fixed_seconds / cost.workers / 3600
    return (
        f"tuning: {arms} arms × {tune.trials} trials × {len(tune.seeds)} seed(s) = "
        f"{arms * tune.runs_per_arm} runs of {tune.steps} steps, {60 * hours:.1f} min with "
        f"{cost.workers} worker(s), counted in every design's hours"
    )


def recommendation(plan: Plan) -> str:
    """One sentence: the design to run and what it reaches."""
    d = plan.best
    shape = f"{d.seeds} seeds × {d.problems} problems × {d.samples} samples"
    where = (
        f"{d.hours:.2f} of {plan.budget_hours:g} hours with {plan.cost.workers} worker(s), "
        f"alpha {plan.alpha:.3g} per contrast (m = {plan.family}), 80% power, seed SD at its 80% "
        "upper bound"
    )
    if d.mde <= plan.effect:
        return f"run {shape}: detects |Δ| = {plan.effect:g} in every contrast ({where})."
    return (
        f"no design within budget detects |Δ| = {plan.effect:g}; the best, {shape}, reaches "
        f"|Δ| = {d.mde:.3f} ({where})."
    )


def control_lines(plan: Plan) -> list[str]:
    """One sentence per declared control: its detection probability, stated in advance, at the
    recommended design and at the study's own."""
    own = {c.label: c for c in plan.own_checks}
    out = []
    for c in plan.checks:
        if c.kind == "contrast":
            continue
        d, o = plan.own, own.get(c.label)
        at_own = (
            f"; at the study's own {d.seeds} seeds × {d.problems} × {d.samples}: {o.power:.2f}"
            f"{_simulated(o)}"
            if o is not None and d is not None
            else ""
        )
        out.append(
            f"{c.kind} {c.label} (declared Δ {c.effect:+.3g}): detected with probability "
            f"{c.power:.2f}{_simulated(c)} at the recommended design, on the contrasts' seeds"
            f"{at_own}" + (f" ({c.note})" if c.note else "")
        )
    return out


def _simulated(c: PowerCheck) -> str:
    return f" ({c.simulated:.2f} simulated)" if c.simulated == c.simulated else ""
