"""The labelled best-checkpoint reading: each trial's checkpoint chosen where its pass@1 on the
selection split (`EvalSpec.selection_problems`: eval-split problems the headline never reads) is
highest, and its eval pass@1 read there. Choosing the best checkpoint on the eval problems
themselves would be selection on the test set; the headline stays the final checkpoint."""

from __future__ import annotations

import pandas as pd

from ablate.factors.eval_spec import SELECTION_METRIC
from ablate.report.data.load import StudyData
from ablate.report.data.table import Table, TableSpec
from ablate.report.stats import inference
from ablate.report.stats import measures as m

EVAL = "eval/pass_at_1"


def best_steps(history: pd.DataFrame) -> pd.DataFrame:
    """trial_id -> step, selection pass@1 and eval pass@1 at the step whose selection pass@1 is
    highest (the latest such step on a tie: the one nearer the final checkpoint)."""
    sel = m.curve(history, SELECTION_METRIC).rename(columns={"value": "selection"})
    ev = m.curve(history, EVAL).rename(columns={"value": "eval"})
    both = sel.merge(ev, on=["trial_id", "step"]).sort_values(["trial_id", "step"])
    if both.empty:
        return pd.DataFrame(columns=["step", "selection", "eval"])
    top = both.groupby("trial_id")["selection"].transform("max")
    return both[both["selection"] == top].groupby("trial_id")[["step", "selection", "eval"]].last()


def best_checkpoint_table(data: StudyData) -> Table:
    best = best_steps(data.history)
    final = m.headline(data, m.final_value(data.history, EVAL))
    rows = []
    for arm, model, template in m.cells(data):
        t = data.complete()
        ids = t[(t["arm"] == arm) & (t["model"] == model) & (t["template"] == template)]
        ids = [i for i in ids["trial_id"] if i in best.index]
        chosen = best.loc[ids] if ids else best.iloc[:0]
        rows.append(
            {
                "arm": arm,
                "base · template": f"{model} · {template}",
                "final pass@1": inference.t_interval(final.reindex(ids).to_numpy()),
                "pass@1 at best selection checkpoint": inference.t_interval(chosen["eval"]),
                "chosen steps": ", ".join(str(int(s)) for s in chosen["step"]),
                "best − final": inference.t_interval(
                    chosen["eval"].to_numpy() - final.reindex(ids).to_numpy()
                ),
            }
        )
    caption = (
        "A secondary, labelled reading: each trial's checkpoint chosen by its pass@1 on the "
        "selection split (eval-split problems after the headline's, never trained on and never "
        "read by the headline), then its eval pass@1 read at that checkpoint; mean over seeds "
        "[95% t interval]. The headline stays the final checkpoint."
    )
    return Table(caption, rows)


def has_selection(data: StudyData) -> bool:
    return bool((data.history["metric"] == SELECTION_METRIC).any()) if len(data.history) else False


TABLES = (TableSpec(name="best_checkpoint", build=best_checkpoint_table, applies=has_selection),)
