"""A pilot study for `ablate plan`: its trials, each finished trial's final eval per problem
(pass rates) and per sample (the outcomes the arms of a seed drew with one eval seed), and the
matched seeds × problems matrices of a contrast, from which `design.contrast_components` reads
the variance components, the eval noise of the *difference* included.

A diverged trial counts 0 on every problem and every sample, as in the report's headline.
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
from ablate.report.stats.design import Components
from ablate.study.study import Study

_CELL = ["arm", "model", "template", "seed"]


@dataclass(frozen=True)
class Pilot:
    """A pilot's trials (arm, model, template, seed, outcome, steps, evals, problems,
    train_seconds, run_seconds) and each finished trial's per-problem pass rates at its final
    eval (keyed by (arm, model, template, seed)); `samples` is the pilot's K. `draws` holds the
    same eval per sample, problems × samples 0..K − 1 (0/1), for the trials that logged every
    sample of every problem."""

    name: str
    trials: pd.DataFrame
    rates: dict[tuple, pd.Series]
    samples: int
    draws: dict[tuple, pd.DataFrame] = field(default_factory=dict)


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
    K = int(per_problem.max())
    outcomes = final.pivot_table("correct", ["trial_id", "problem_id"], "sample", aggfunc="mean")
    keyed, draws = {}, {}
    for _, r in trials[finished].iterrows():
        cell, trial = tuple(r[c] for c in _CELL), r["trial_id"]
        keyed[cell] = rates.loc[trial].astype(float)
        per_sample = outcomes.loc[trial].astype(float)
        if per_sample.shape[1] == K and not per_sample.isna().to_numpy().any():
            draws[cell] = per_sample
    return Pilot(study_name, trials, keyed, K, draws)


def primary_family(study: Study) -> list[tuple[str, str, str]]:
    """(arm, model, template) of every contrast with the reference in the primary family."""
    ref = study.reference_arm
    arms = [a.name for a in study.compared_arms if a.name != ref]
    return list(itertools.product(arms, study.base_models, study.templates))


def _rates(pilot: Pilot, cell: tuple, problems: list) -> np.ndarray:
    """[J] pass rates of one pilot trial on `problems`; zeros for a diverged trial."""
    found = pilot.rates.get(cell)
    return np.zeros(len(problems)) if found is None else found.loc[problems].to_numpy(float)


def _draws(pilot: Pilot, cell: tuple, problems: list) -> np.ndarray | None:
    """[J, K] per-sample outcomes of one pilot trial; zeros for a diverged trial; None for a
    finished trial without them."""
    if cell not in pilot.rates:
        return np.zeros((len(problems), pilot.samples))
    found = pilot.draws.get(cell)
    return None if found is None else found.loc[problems].to_numpy(float)


@dataclass(frozen=True)
class Pair:
    """One contrast's pilot data on its shared seeds and problems."""

    arm: np.ndarray  # [n, J] pass rates
    ref: np.ndarray
    draws: tuple[np.ndarray, np.ndarray] | None  # [n, J, K] each, paired by sample index


def pilot_pair(pilot: Pilot, arm: str, ref: str, model: str, template: str) -> Pair | None:
    """arm vs ref on the seeds both ran and the problems every finished trial of them
    evaluated; None below 2 shared seeds."""
    seeds_of = pilot.trials.groupby(["arm", "model", "template"])["seed"].apply(set).to_dict()
    seeds = sorted(seeds_of.get((arm, model, template), set()))
    seeds = [s for s in seeds if s in seeds_of.get((ref, model, template), set())]
    cells = [(a, model, template, s) for a in (arm, ref) for s in seeds]
    evaluated = [set(pilot.rates[c].index) for c in cells if c in pilot.rates]
    problems = sorted(set.intersection(*evaluated)) if evaluated else []
    if len(seeds) < 2 or not problems:
        return None
    a = np.stack([_rates(pilot, (arm, model, template, s), problems) for s in seeds])
    r = np.stack([_rates(pilot, (ref, model, template, s), problems) for s in seeds])
    da = [_draws(pilot, (arm, model, template, s), problems) for s in seeds]
    dr = [_draws(pilot, (ref, model, template, s), problems) for s in seeds]
    paired = all(x is not None for x in (*da, *dr))
    return Pair(a, r, (np.stack(da), np.stack(dr)) if paired else None)


def contrast_matrices(
    pilot: Pilot, study: Study, ref: str
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per primary contrast "arm · model · template" with 2+ shared pilot seeds: (arm[n, J],
    ref[n, J]) on the seeds both arms ran and the problems every finished trial evaluated."""
    out = {}
    for arm, model, template in primary_family(study):
        pair = pilot_pair(pilot, arm, ref, model, template)
        if pair is not None:
            out[f"{arm} · {model} · {template}"] = (pair.arm, pair.ref)
    return out


def pilot_components(
    pilot: Pilot, keys: list[tuple[str, str, str]], ref: str
) -> dict[str, Components]:
    """Components of each (arm, model, template) against `ref` with 2+ shared pilot seeds, v
    from the paired per-sample differences where every trial logged them."""
    out = {}
    for arm, model, template in keys:
        pair = pilot_pair(pilot, arm, ref, model, template)
        if pair is not None:
            c = design.contrast_components(pair.arm, pair.ref, pilot.samples, pair.draws)
            out[f"{arm} · {model} · {template}"] = c
    return out
