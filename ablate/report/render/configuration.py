"""The arm-configuration table: what each arm is next to the reference (the fields it changes,
its update schedule, KL term and dynamic sampling) and the tokens it generates per step, the
confounds a reader must see before any contrast."""

from __future__ import annotations

from ablate.factors import confounds
from ablate.report.data.load import StudyData
from ablate.report.data.table import Table, TableSpec
from ablate.report.stats import measures as m


def config_table(data: StudyData) -> Table:
    """What each arm is, next to the reference: the confounds a reader must see first."""
    ref_name = data.reference_arm
    ref = data.algorithm(ref_name)
    per_step = m.tokens_per_step(data)
    rows = []
    for arm in dict.fromkeys(data.trials["arm"]):
        algo = data.algorithm(arm)
        diff = confounds.differing_fields(algo, ref)
        ids = data.trials[data.trials["arm"] == arm]["trial_id"]
        tokens = per_step.reindex(ids).dropna()
        rows.append(
            {
                "arm": arm,
                "differs from reference": _diff_text(arm, algo, diff, data),
                "updates / rollout": confounds.schedule(algo),
                "KL": confounds.kl_setting(algo),
                "dynamic sampling": "yes" if algo.dynamic_sampling else "no",
                "gen. tokens / step": round(float(tokens.mean()), 1) if len(tokens) else None,
            }
        )
    caption = (
        f"Arms against the reference `{ref_name}`: the fields each arm changes (every one is a "
        "possible cause of its contrast), its update schedule, KL term, dynamic sampling, and "
        "measured generated tokens per RL step (mean over its trials, discarded samples included)."
    )
    return Table(caption, rows)


def _diff_text(arm: str, algo, diff: list[str], data: StudyData) -> str:
    if arm == data.reference_arm:
        return "(reference)"
    if arm in data.replicates:
        return f"A/A replicate of {data.replicates[arm]} (rollouts of its own)"
    return ", ".join(f"{f}={getattr(algo, f)!r}" for f in diff) or "nothing (same algorithm)"


TABLES = (TableSpec(name="configuration", build=config_table),)
