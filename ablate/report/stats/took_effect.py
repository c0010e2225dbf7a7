"""Did a factor take effect? Per compared arm and differing factor, the share of tokens or
samples that factor changed in training, read from the trials' logged metrics; an arm whose
factor changed less than `INERT_SHARE` of them is marked inert: its contrast with the reference
is "not testable at this setting" (a rollout correction without mismatch weights every token 1;
peers have shipped such silent no-ops: verl #4912, NeMo-RL PR #4013).

A factor is checked when a logged metric says what share it changed (`SHARE_METRICS`); the
others are not listed. The share is the larger of the arm's and the reference's mean over
steps and trials (the factor may be on in either), 0 when neither logged it (it never ran).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pandas as pd

from ablate.report.data.arms import arm_engine
from ablate.report.data.load import StudyData

#: Below this share of changed tokens/samples a differing factor is inert.
INERT_SHARE = 0.01
NOT_TESTABLE = "not testable at this setting"
INERT = "inert"  # a factor's verdict; an arm with nothing but inert factors is NOT_TESTABLE

_CORRECTION_SHARE = "offpolicy/changed_frac"  # tokens whose loss weight the correction moved off 1
_MISMATCH_SHARE = "offpolicy/mismatched_frac"  # tokens whose engine log-prob is not the trainer's
#: factor field -> the logged metric: the share of tokens or samples it changed at each step
SHARE_METRICS: dict[str, str] = {
    **{
        name: _CORRECTION_SHARE
        for name in (
            "rollout_correction",
            "rollout_correction_cap",
            "rollout_correction_floor",
            "rejection_k3_max",
            "opsm_delta",
            "m2po_threshold",
        )
    },
    "rollout_precision": _MISMATCH_SHARE,
    "rollout_staleness": _MISMATCH_SHARE,
}


def _mean_share(history: pd.DataFrame, arm: str, metric: str) -> float:
    rows = history[(history["arm"] == arm) & (history["metric"] == metric)]
    return float(rows["value"].mean()) if len(rows) else 0.0


def factor_shares(data: StudyData) -> list[dict]:
    """One row per compared arm and checked differing factor (the fields one metric measures
    together, e.g. a correction and its cap, name one row): arm, factor, the share it changed,
    the verdict ("inert" below `INERT_SHARE`), and `_all_inert`: whether nothing the arm
    changes is known to have acted (every differing field checked, every one inert)."""
    ref = data.reference_arm
    ref_algo = data.algorithm(ref)
    rows = []
    for arm in data.compared_arms:
        if arm == ref:
            continue
        differing = list(data.algorithm(arm).diff(ref_algo))
        by_metric: dict[str, list[str]] = {}
        for field_name in differing:
            if (metric := SHARE_METRICS.get(field_name)) is not None:
                by_metric.setdefault(metric, []).append(field_name)
        mine = []
        for metric, fields in by_metric.items():
            share = max(
                _mean_share(data.history, arm, metric), _mean_share(data.history, ref, metric)
            )
            inert = share < INERT_SHARE
            mine.append(
                {
                    "arm": arm,
                    "factor": ", ".join(fields),
                    "share changed": share,
                    "verdict": INERT if inert else "took effect",
                    "_inert": inert,
                }
            )
        # an arm on another engine changes its samples beyond any share a metric measures
        other_engine = arm_engine(data.trials, arm) != arm_engine(data.trials, ref)
        every = not other_engine and len(differing) == sum(len(f) for f in by_metric.values())
        all_inert = every and all(r["_inert"] for r in mine)
        rows += [{**r, "_all_inert": all_inert} for r in mine]
    return rows


def inert_arms(data: StudyData) -> set[str]:
    """The arms whose every differing factor changed under `INERT_SHARE` of what it could:
    their contrasts test nothing that ran."""
    return {row["arm"] for row in factor_shares(data) if row["_all_inert"]}


def inert_verdicts(data: StudyData, rows: list[Any]) -> list[Any]:
    """`rows` (contrast rows: `arm`, `verdict`, `note`) with an inert arm's verdict replaced by
    `NOT_TESTABLE`, whatever its p: the factor it tests barely ran, so a difference or an
    equivalence would be read about a factor that was never exercised."""
    inert: dict[str, dict] = {}
    for r in factor_shares(data):
        if r["_all_inert"]:
            inert.setdefault(r["arm"], r)
    out = []
    for row in rows:
        if row.arm in inert:
            why = inert[row.arm]
            note = f"{why['factor']} changed {why['share changed']:.1%} of training tokens"
            row = replace(row, verdict=NOT_TESTABLE, note=note)
        out.append(row)
    return out


def partly_inert_sentences(data: StudyData) -> list[str]:
    """A caveat per inert factor of an arm whose other factors acted: its contrast measures
    those others only."""
    return [
        f"{r['arm']}: {r['factor']} changed {r['share changed']:.1%} of training tokens (inert "
        f"at this setting): its contrast with {data.reference_arm} measures its other "
        "differing factors only."
        for r in factor_shares(data)
        if r["_inert"] and not r["_all_inert"]
    ]


#: The off-policy diagnostics the report tabulates per arm: metric -> (column, how steps combine).
DIAGNOSTICS = {
    "offpolicy/staleness": ("staleness", "mean"),
    "offpolicy/logp_diff_mean": ("|Δ log p| mean", "mean"),
    "offpolicy/logp_diff_max": ("|Δ log p| max", "max"),
    "offpolicy/prob_pearson": ("Pearson p", "mean"),
    "offpolicy/k3_kl": ("k3 KL", "mean"),
    "offpolicy/mismatched_frac": ("mismatched", "mean"),
    "offpolicy/changed_frac": ("reweighted", "mean"),
    "offpolicy/masked_frac": ("masked", "mean"),
    "offpolicy/clipped_frac": ("clipped", "mean"),
    "offpolicy/ess": ("ESS", "mean"),
}


def diagnostics(data: StudyData) -> list[dict]:
    """Per arm that logged any `offpolicy/` metric (a correction or a mismatch was active), each
    of `DIAGNOSTICS` over its trials' training steps: the mean, or for the max gap the max."""
    h = data.history
    if h.empty:
        return []
    h = h[h["metric"].isin(list(DIAGNOSTICS))]
    rows = []
    for arm in dict.fromkeys(data.trials["arm"]):
        mine = h[h["arm"] == arm]
        if mine.empty:
            continue
        row: dict[str, Any] = {"arm": arm}
        for metric, (column, how) in DIAGNOSTICS.items():
            got = mine[mine["metric"] == metric]["value"]
            row[column] = float(getattr(got, how)()) if len(got) else float("nan")
        rows.append(row)
    return rows
