"""The arm-configuration table: what each arm is next to the reference (the fields it changes,
its update schedule, KL term and dynamic sampling) and the tokens it generates per step, the
confounds a reader must see before any contrast."""

from __future__ import annotations

from ablate.factors import confounds
from ablate.report.data.arms import arm_engine
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
                **_tuning_cells(arm, data),
            }
        )
    caption = (
        f"Arms against the reference `{ref_name}`: the fields each arm changes (every one is a "
        "possible cause of its contrast), its update schedule, KL term, dynamic sampling, and "
        "measured generated tokens per RL step (mean over its trials, discarded samples included); "
        f"its tuning budget and the setting its trials train at ({setting_text(data)})."
    )
    return Table(caption, rows)


def setting_text(data: StudyData) -> str:
    """How the arms' settings were set: 'tuned per arm, N trials each' or 'shared setting'."""
    if data.tune is None:
        return f"shared setting ({values_text(data.shared)})"
    t = data.tune
    return (
        f"tuned per arm, {t.trials} trials each ({', '.join(t.params)}; {t.describe()}, "
        "chosen by selection pass@1)"
    )


def values_text(values) -> str:
    return ", ".join(
        f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items()
    )


def _tuning_cells(arm: str, data: StudyData) -> dict[str, str]:
    """The arm's tuning budget and the setting its trials train at."""
    if data.tune is None:
        return {"tuning": "none (shared)", "setting": values_text(data.shared)}
    chosen = data.chosen()
    twin = data.replicates.get(arm)
    budget = f"its twin's ({twin})" if twin else f"{data.tune.trials} × {len(data.tune.seeds)} runs"
    return {"tuning": budget, "setting": values_text(chosen[arm]) if arm in chosen else "–"}


def _diff_text(arm: str, algo, diff: list[str], data: StudyData) -> str:
    if arm == data.reference_arm:
        return "(reference)"
    if arm in data.replicates:
        return f"A/A replicate of {data.replicates[arm]} (rollouts of its own)"
    changes = [f"{f}={getattr(algo, f)!r}" for f in diff]
    if (engine := arm_engine(data.trials, arm)) != arm_engine(data.trials, data.reference_arm):
        changes.append(f"engine={engine!r}")
        if not diff:
            changes.append("same algorithm")
    return ", ".join(changes) or "nothing (same algorithm)"


TABLES = (TableSpec(name="configuration", build=config_table),)
