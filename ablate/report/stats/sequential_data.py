"""A study's results → the inputs of the sequential replay (`sequential.replay`): per-(seed,
problem) differences arm − reference at each trial's final eval on the seeds where both
survived, and how many looks have been run.

Stateless on purpose: `ablate run --until-decided` and the report rebuild the same look history
from the same results, so the decision the runner took is the one the report shows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ablate.report.data.load import StudyData
from ablate.report.stats import inference
from ablate.report.stats import problems as pr
from ablate.report.stats.sequential import SequentialResult, replay

#: Run statuses after which a trial will not change: a look whose trials all have one is reached.
SETTLED = ("FINISHED", "FAILED")


def _cell_trials(data: StudyData, arm: str, model: str, template: str) -> pd.DataFrame:
    t = data.trials
    return t[(t["arm"] == arm) & (t["model"] == model) & (t["template"] == template)]


def seed_order(data: StudyData, model: str, template: str) -> list[int]:
    """The study's seeds in its order (the reference arm's planned trials of the cell)."""
    seeds = _cell_trials(data, data.reference_arm, model, template)["seed"]
    return [int(s) for s in dict.fromkeys(seeds)]


def problem_scores(data: StudyData, arm: str, model: str, template: str) -> pd.DataFrame:
    """Pass rate per seed (rows) and eval problem (columns) at each trial's final eval step,
    surviving trials only (`problems.cell_matrix`): the design tests the survivors' Δ, as the
    headline does (`stats.divergence`); diverged, failed and missing trials have no row."""
    table = pr.cell_matrix(data, pr.final_rates(data), arm, model, template, diverged=False)
    if table.empty:
        return table
    table.index = table.index.astype(int)
    return table.astype(float)


def contrast_differences(
    data: StudyData, arm: str, model: str, template: str
) -> tuple[np.ndarray, np.ndarray]:
    """d[n, J] = arm − reference per (seed, problem) over the seeds both have (common random
    numbers: same seeds, same problems) and the problems every one of them has, with each row's
    seed's position in the study's seed order (`ranks[n]`), rows in that order."""
    order = {seed: i for i, seed in enumerate(seed_order(data, model, template))}
    a = problem_scores(data, arm, model, template)
    r = problem_scores(data, data.reference_arm, model, template)
    seeds = sorted(set(a.index) & set(r.index) & set(order), key=order.__getitem__)
    diff = (a.loc[seeds] - r.loc[seeds]).dropna(axis=1)  # [n, J]
    return diff.to_numpy(dtype=float), np.array([order[s] for s in seeds], dtype=int)


def looks_reached(data: StudyData, arm: str, model: str, template: str) -> int:
    """How many of `data.looks` have all their trials (arm and reference, first looks[k] seeds)
    settled: finished, diverged or failed."""
    order = {seed: i for i, seed in enumerate(seed_order(data, model, template))}
    trials = pd.concat([_cell_trials(data, x, model, template) for x in (arm, data.reference_arm)])
    ranks = trials["seed"].astype(int).map(order)
    unsettled = ranks[~trials["status"].isin(SETTLED)]
    first_open = unsettled.min() if len(unsettled) else np.inf  # rank of the first open seed
    return int(sum(n_k <= first_open for n_k in data.looks))


def primary_contrasts(data: StudyData) -> list[tuple[str, str, str]]:
    """(arm, model, template) of the primary family: every compared arm against the reference
    in every model × template cell where both have trials."""
    cells = data.trials[["model", "template"]].drop_duplicates().itertuples(index=False)
    out = []
    for model, template in cells:
        if _cell_trials(data, data.reference_arm, model, template).empty:
            continue
        for arm in data.compared_arms:
            if arm != data.reference_arm and not _cell_trials(data, arm, model, template).empty:
                out.append((arm, model, template))
    return out


def contrast_name(data: StudyData, arm: str, model: str, template: str, cells: int) -> str:
    name = f"{arm} − {data.reference_arm}"
    return name if cells <= 1 else f"{name} ({model} · {template})"


def replay_study(
    data: StudyData, alpha: float = inference.ALPHA
) -> dict[tuple[str, str, str], SequentialResult]:
    """The study's sequential design replayed on its results (`data.looks` must be set):
    (arm, model, template) -> its look history, the primary family Bonferroni-split."""
    keys = primary_contrasts(data)
    cells = len({(model, template) for _, model, template in keys})
    contrasts = {}
    for arm, model, template in keys:
        d, ranks = contrast_differences(data, arm, model, template)
        reached = looks_reached(data, arm, model, template)
        contrasts[contrast_name(data, arm, model, template, cells)] = (d, ranks, reached)
    results = replay(contrasts, data.looks, alpha, data.margin, data.spending)
    return dict(zip(keys, results, strict=True))
