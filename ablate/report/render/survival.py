"""Survivorship: how many trials each arm planned, finished, lost to divergence, saturation or
failure, and every trial that did not finish with its reason. A lost trial is listed, never
dropped in silence (the headline reads divergence as its own outcome, `stats.divergence`)."""

from __future__ import annotations

from ablate.report.data.load import StudyData
from ablate.report.data.table import Table, TableSpec
from ablate.report.render.headline import cell_trials
from ablate.report.stats import measures as m
from ablate.report.stats import outcomes


def survival_table(data: StudyData) -> Table:
    classes = outcomes.outcome_class(data.trials)
    rows = []
    for cell in m.cells(data):
        planned = cell_trials(data, cell)
        kind = classes.reindex(planned["trial_id"].to_numpy())
        diverged = planned[planned["outcome"] == "diverged"]
        steps = sorted(int(s) for s in diverged["diverged_step"].dropna())
        rows.append(
            {
                "arm": cell[0],
                "base · template": f"{cell[1]} · {cell[2]}",
                "planned": len(planned),
                "finished": int(planned["complete"].sum()),
                "diverged": len(diverged),
                "diverged at step": ", ".join(map(str, steps)),
                "saturated": int((kind == outcomes.SATURATED).sum()),
                "failed": int((kind == outcomes.FAILED).sum()),
                "missing / unfinished": int((kind == outcomes.PENDING).sum()),
            }
        )
    caption = (
        "Trials per arm: planned, finished, diverged, saturated (dynamic sampling or "
        "No-Positive-Resampling ran out of informative prompts: the algorithm's outcome, not a "
        f"harness failure), failed. Rule: {m.DIVERGED_RULE}."
    )
    return Table(caption, rows)


def incomplete_table(data: StudyData) -> Table:
    bad = data.trials[~data.trials["complete"]]
    rows = [
        dict(
            arm=r.arm,
            model=r.model,
            template=r.template,
            seed=r.seed,
            status=r.status,
            outcome=r.outcome,
            reason=r.reason,
        )
        for r in bad.itertuples()
    ]
    caption = f"Trials that did not finish, with the reason. Rule: {m.DIVERGED_RULE}."
    return Table(caption, rows)


TABLES = (
    TableSpec(name="survival", build=survival_table),
    TableSpec(name="incomplete", build=incomplete_table),
)
