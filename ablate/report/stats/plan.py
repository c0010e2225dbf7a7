"""`ablate plan`: turn a pilot into a seed count. From the pilot's final eval pass@1 per trial,
each of the full study's contrasts gets the SD of its paired per-seed differences, and from it
the seeds needed for 80% power at the study's Holm family size (alpha / m, Bonferroni-bounded).

A pilot of a few seeds underestimates that SD about half the time (Colas et al. 2018), so each
row also gives the seeds needed under the SD's one-sided 80% upper confidence bound, and the
recommendation uses that bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import chi2

from ablate.errors import ConfigError, StudyError
from ablate.report.stats import inference as stats
from ablate.study import Study

SD_UPPER_CONFIDENCE = 0.8
_CELL = ["arm", "model", "template", "seed"]


@dataclass(frozen=True)
class PlanRow:
    arm: str
    cell: str
    pilot_seeds: int
    delta: float
    sd: float
    sd_upper: float
    for_effect: int | None
    for_effect_upper: int | None
    for_delta: int | None


def pilot_values(
    results: str | Path, study_name: str, tracking_uri: str | None = None
) -> pd.DataFrame:
    """arm, model, template, seed, value: each pilot trial's final eval pass@1 (diverged = 0),
    from the results store `tracking_uri` (default: the folder `results`' own)."""
    from ablate import tracking

    root = Path(results)
    store = tracking.open_store(tracking_uri or tracking.default_uri(root))
    if not store.exists():
        raise ConfigError(
            f"no pilot results in {root} (no {store.kind} at {store.uri}): run the pilot there "
            "first"
        )
    table = store.runs(study_name)
    metric = "eval/pass_at_1"
    if table.empty or metric not in table.metrics:
        raise StudyError(f"{root} holds no finished trials of study {study_name!r}")
    runs, value = table.runs, table.metric(metric)
    outcome = runs["outcome"].fillna("")
    keep = (runs["status"] == "FINISHED") & outcome.isin(["finished", "diverged"])
    frame = runs.loc[keep, _CELL].astype(object).reset_index(drop=True)
    frame["value"] = value[keep].where(outcome[keep] != "diverged", 0.0).to_numpy(float)
    frame = frame.replace({pd.NA: np.nan}).dropna()
    frame["seed"] = frame["seed"].astype(int)
    return frame


def _sd_upper(sd: float, n: int) -> float:
    """One-sided upper confidence bound of an SD from n − 1 degrees of freedom."""
    if n < 2 or not math.isfinite(sd):
        return float("nan")
    return sd * math.sqrt((n - 1) / chi2.ppf(1 - SD_UPPER_CONFIDENCE, n - 1))


def _needed(effect: float | None, sd: float, alpha: float) -> int | None:
    return stats.seeds_needed(abs(effect), sd, alpha, 0.8) if effect else None


def plan_rows(study: Study, pilot: pd.DataFrame, effect: float | None) -> list[PlanRow]:
    ref = study.reference_arm
    pairs = [
        (a.name, model, template)
        for model in study.base_models
        for template in study.templates
        for a in study.compared_arms
        if a.name != ref
    ]
    alpha = stats.ALPHA / max(len(pairs), 1)
    rows = []
    for arm, model, template in pairs:
        cell = pilot[(pilot["model"] == model) & (pilot["template"] == template)]
        a = cell[cell["arm"] == arm].set_index("seed")["value"]
        r = cell[cell["arm"] == ref].set_index("seed")["value"]
        seeds = sorted(set(a.index) & set(r.index))
        d = (a.loc[seeds] - r.loc[seeds]).to_numpy(float)
        sd = float(np.std(d, ddof=1)) if len(d) >= 2 else float("nan")
        delta = float(d.mean()) if len(d) else float("nan")
        upper = _sd_upper(sd, len(d))
        rows.append(
            PlanRow(
                arm=arm,
                cell=f"{model} · {template}",
                pilot_seeds=len(d),
                delta=delta,
                sd=sd,
                sd_upper=upper,
                for_effect=_needed(effect, sd, alpha),
                for_effect_upper=_needed(effect, upper, alpha),
                for_delta=_needed(delta, sd, alpha),
            )
        )
    return rows


def recommendation(rows: list[PlanRow], effect: float | None) -> str:
    usable = [r for r in rows if r.pilot_seeds >= 2]
    if not usable:
        return "no contrast has 2 pilot seeds in both arms: run at least 2 (better 3) seeds"
    if not effect:
        return (
            "set Study(effect_of_interest=...) or pass --effect to get a seed count for the "
            "smallest Δ pass@1 worth detecting"
        )
    counts = [r.for_effect_upper for r in usable]
    if any(c is None for c in counts):
        return f"more than 1000 seeds would be needed to detect {effect:g} in some contrast"
    return (
        f"seeds = {max(counts)}: 80% power to detect |Δ| = {effect:g} in every contrast, at the "
        f"{SD_UPPER_CONFIDENCE:.0%} upper bound of each pilot SD"
    )
