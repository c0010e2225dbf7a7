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

import pandas as pd

from ablate.report.data.load import StudyData

#: Below this share of changed tokens/samples a differing factor is inert.
INERT_SHARE = 0.01
NOT_TESTABLE = "not testable at this setting"

_CORRECTION_SHARE = "offpolicy/changed_frac"  # tokens whose loss weight the correction moved off 1
#: factor field -> the logged metric: the share of tokens or samples it changed at each step
SHARE_METRICS: dict[str, str] = {
    name: _CORRECTION_SHARE
    for name in (
        "rollout_correction",
        "rollout_correction_cap",
        "rollout_correction_floor",
        "rejection_k3_max",
        "opsm_delta",
        "m2po_threshold",
    )
}


def _mean_share(history: pd.DataFrame, arm: str, metric: str) -> float:
    rows = history[(history["arm"] == arm) & (history["metric"] == metric)]
    return float(rows["value"].mean()) if len(rows) else 0.0


def factor_shares(data: StudyData) -> list[dict]:
    """One row per compared arm and checked differing factor: arm, factor, the share it
    changed, and the verdict (inert below `INERT_SHARE`)."""
    ref = data.reference_arm
    ref_algo = data.algorithm(ref)
    rows = []
    for arm in data.compared_arms:
        if arm == ref:
            continue
        for factor in data.algorithm(arm).diff(ref_algo):
            metric = SHARE_METRICS.get(factor)
            if metric is None:
                continue
            share = max(
                _mean_share(data.history, arm, metric), _mean_share(data.history, ref, metric)
            )
            inert = share < INERT_SHARE
            rows.append(
                {
                    "arm": arm,
                    "factor": factor,
                    "share changed": share,
                    "verdict": NOT_TESTABLE if inert else "took effect",
                    "_inert": inert,
                }
            )
    return rows


def inert_arms(data: StudyData) -> set[str]:
    """The arms with a differing factor that changed under `INERT_SHARE` of what it could."""
    return {row["arm"] for row in factor_shares(data) if row["_inert"]}
