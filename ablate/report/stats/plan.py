"""`ablate plan`: seeds × eval problems × samples per problem for a compute budget and an
effect of interest, from a pilot or from defaults.

A pilot's per-(seed, problem) pass rates at each trial's final eval (a diverged trial counts 0
on every problem) give each primary contrast its variance components (`design.Components`); its
logged wall times give the cost of a training step and of one eval sample. The search
(`design.designs`) prices every design of the grid and judges it by its MDE at Bonferroni
alpha / m over the primary family, the seed term at its 80% upper confidence bound.

Without a pilot the defaults below stand in; they are rough, and each says where it comes from.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ablate import tracking
from ablate.base.errors import ConfigError, StudyError
from ablate.report.data.load import load_samples
from ablate.report.stats import design
from ablate.report.stats.design import Components, Cost, Design
from ablate.report.stats.inference import ALPHA, MIN_SEEDS
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
#: seconds per RL step at 8 prompts × 8 completions × 80 new tokens (scaled by their product)
DEFAULT_STEP_SECONDS, DEFAULT_STEP_TOKENS = 0.58, 8 * 8 * 80
#: seconds per eval sample at 80 new tokens (the slope of the two runs; scaled by the limit)
DEFAULT_EVAL_SAMPLE_SECONDS, DEFAULT_EVAL_TOKENS = 0.0024, 80
#: mean completion length / max_new_tokens (rl_ready's eval: 41.6 of 80 tokens), for the
#: number of evals a token cadence adds
DEFAULT_LENGTH_FRACTION = 0.52
TABLE_ROWS = 5
_CELL = ["arm", "model", "template", "seed"]


@dataclass(frozen=True)
class Pilot:
    """A pilot's trials (arm, model, template, seed, outcome, steps, evals, problems,
    train_seconds, run_seconds) and each finished trial's per-problem pass rates at its final
    eval (keyed by (arm, model, template, seed)); `samples` is the pilot's K."""

    name: str
    trials: pd.DataFrame
    rates: dict[tuple, pd.Series]
    samples: int


def _finished_runs(results: Path, study_name: str, tracking_uri: str | None):

    store = tracking.open_store(tracking_uri or tracking.default_uri(results))
    if not store.exists():
        raise ConfigError(
            f"no pilot results in {results} (no {store.kind} at {store.uri}): run the pilot "
            "there first"
        )
    table = store.runs(study_name).one_per_trial()
    outcome = table.runs["outcome"].fillna("")
    keep = (table.runs["status"] == "FINISHED") & outcome.isin(["finished", "diverged"])
    if not keep.any():
        raise StudyError(f"{results} holds no finished trials of study {study_name!r}")
    return store, table.where(keep)


def load_pilot(results: str | Path, study_name: str, tracking_uri: str | None = None) -> Pilot:
    """The pilot `study_name` in results folder `results` (or store `tracking_uri`)."""

    store, table = _finished_runs(Path(results), study_name, tracking_uri)
    runs = table.runs.reset_index(drop=True)
    trials = runs[["run_id", "trial_id", *_CELL, "outcome"]].astype(object)
    trials["train_seconds"] = table.metric("budget/wall_seconds").to_numpy(float)
    trials["run_seconds"] = (runs["end_time"] - runs["start_time"]).to_numpy(float) / 1000
    trials = trials.replace({pd.NA: np.nan}).dropna(subset=_CELL)  # runs without cell tags
    trials["seed"] = trials["seed"].astype(int)
    samples = load_samples(store, trials)
    finished = trials["outcome"] == "finished"
    missing = set(trials.loc[finished, "trial_id"]) - set(samples["trial_id"])
    if missing or samples.empty:
        raise StudyError(
            f"the pilot {study_name!r} in {results} has finished trials without per-sample eval "
            "records (samples/eval_step*.parquet): run it again with this version of ablate"
        )
    by_trial = samples.groupby("trial_id")
    steps, evals = by_trial["step"].max(), by_trial["step"].nunique()
    final = samples[samples["step"] == samples["trial_id"].map(steps)]
    rates = final.groupby(["trial_id", "problem_id"])["correct"].mean()
    trials["steps"] = trials["trial_id"].map(steps).astype(float)
    trials["evals"] = trials["trial_id"].map(evals).astype(float)
    trials["problems"] = trials["trial_id"].map(final.groupby("trial_id")["problem_id"].nunique())
    per_problem = final.groupby(["trial_id", "problem_id"]).size()
    keyed = {
        tuple(r[c] for c in _CELL): rates.loc[r["trial_id"]].astype(float)
        for _, r in trials[finished].iterrows()
    }
    return Pilot(study_name, trials, keyed, int(per_problem.max()))


def primary_family(study: Study) -> list[tuple[str, str, str]]:
    """(arm, model, template) of every contrast with the reference in the primary family."""
    ref = study.reference_arm
    arms = [a.name for a in study.compared_arms if a.name != ref]
    return list(itertools.product(arms, study.base_models, study.templates))


def _rates(pilot: Pilot, cell: tuple, problems: list) -> np.ndarray:
    """[J] pass rates of one pilot trial on `problems`; zeros for a diverged trial."""
    found = pilot.rates.get(cell)
    return np.zeros(len(problems)) if found is None else found.loc[problems].to_numpy(float)


def contrast_matrices(
    pilot: Pilot, study: Study, ref: str
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per primary contrast "arm · model · template" with 2+ shared pilot seeds: (arm[n, J],
    ref[n, J]) on the seeds both arms ran and the problems every finished trial evaluated."""
    seeds_of = pilot.trials.groupby(["arm", "model", "template"])["seed"].apply(set).to_dict()
    out = {}
    for arm, model, template in primary_family(study):
        seeds = sorted(seeds_of.get((arm, model, template), set()))
        seeds = [s for s in seeds if s in seeds_of.get((ref, model, template), set())]
        cells = [(a, model, template, s) for a in (arm, ref) for s in seeds]
        evaluated = [set(pilot.rates[c].index) for c in cells if c in pilot.rates]
        problems = sorted(set.intersection(*evaluated)) if evaluated else []
        if len(seeds) < 2 or not problems:
            continue
        a = np.stack([_rates(pilot, (arm, model, template, s), problems) for s in seeds])
        r = np.stack([_rates(pilot, (ref, model, template, s), problems) for s in seeds])
        out[f"{arm} · {model} · {template}"] = (a, r)
    return out


def default_components() -> Components:
    """One contrast's components from the defaults above: the arms' training variances add
    (independent trajectories), and so do their per-sample variances."""
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


def make_plan(
    study: Study,
    effect: float,
    budget_hours: float,
    pilot: Pilot | None = None,
    workers: int = 1,
    problems: tuple[int, ...] | None = None,
) -> Plan:
    """The recommended design and the best few (`design.frontier`) for `study`."""
    if not effect > 0:
        raise ConfigError(f"the effect to detect must be a Δ pass@1 > 0 (got {effect})")
    if workers < 1:
        raise ConfigError(f"workers={workers} must be >= 1")
    family = primary_family(study)
    if not family:
        raise StudyError(f"study {study.name!r} has no contrast with its reference to plan for")
    if pilot is None:
        components = {"defaults (every contrast)": default_components()}
        cost, source = default_cost(study, workers), "defaults (no pilot)"
    else:
        mats = contrast_matrices(pilot, study, study.reference_arm)
        if not mats:
            raise StudyError(
                f"the pilot {pilot.name!r} has no contrast with 2 seeds in both arms: run at "
                f"least 2 (better {MIN_SEEDS}) seeds of the reference and another arm"
            )
        components = {
            k: design.contrast_components(a, r, pilot.samples) for k, (a, r) in mats.items()
        }
        cost = pilot_cost(pilot, study, workers)
        source = (
            f"pilot {pilot.name!r} ({pilot.trials['seed'].nunique()} seeds, K = {pilot.samples})"
        )
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
    return Plan(
        effect=effect,
        budget_hours=budget_hours,
        family=len(family),
        alpha=alpha,
        cost=cost,
        best=design.recommend(grid, effect, budget_hours),
        table=design.frontier(grid, effect, budget_hours)[:TABLE_ROWS],
        components=components,
        source=source,
        untested=sorted(labels - set(components)) if pilot is not None else [],
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
