"""Per-(seed, problem) pass rates: the matrices the task-level statistics read.

From `StudyData.samples` (every eval sample of every trial): a trial's pass rate on each eval
problem at one eval step (the mean of its K samples). A diverged trial enters as 0 on every
problem where a reading counts it so, and is left out of the survivors' reading that the
headline contrasts use (`measures.DIVERGED_RULE`); failed and missing trials are left out, as
everywhere.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ablate.report.data.load import StudyData
from ablate.report.data.memo import per_study


@per_study
def final_rates(data: StudyData) -> pd.DataFrame:
    """trial_id × problem_id pass rates at each trial's last eval step (complete trials)."""
    s = data.samples
    if not len(s):
        return pd.DataFrame()
    ids = set(data.complete()["trial_id"])
    s = s[s["trial_id"].isin(ids)]
    last = s.groupby("trial_id")["step"].transform("max")
    return rates_at(s[s["step"] == last])


def rates_at(samples: pd.DataFrame) -> pd.DataFrame:
    """trial_id × problem_id mean correctness of the given sample rows."""
    if not len(samples):
        return pd.DataFrame()
    correct = samples["correct"].astype(float)
    table = correct.groupby([samples["trial_id"], samples["problem_id"]]).mean().unstack()
    return table.sort_index(axis=1)


def cell_matrix(
    data: StudyData,
    rates: pd.DataFrame,
    arm: str,
    model: str,
    template: str,
    *,
    diverged: bool = True,
) -> pd.DataFrame:
    """seed × problem_id pass rates of one cell: complete trials from `rates`, diverged trials
    as a row of zeros (the hurdle reading; `diverged=False`: left out, the survivors' reading);
    a trial with no eval samples is left out (it has no per-problem record)."""
    t = data.trials
    t = t[(t["arm"] == arm) & (t["model"] == model) & (t["template"] == template)]
    rows = {}
    for trial in t.itertuples():
        if trial.outcome == "diverged" and len(rates.columns) and diverged:
            rows[trial.seed] = pd.Series(0.0, index=rates.columns)
        elif trial.complete and trial.trial_id in rates.index:
            rows[trial.seed] = rates.loc[trial.trial_id]
    if not rows:
        return pd.DataFrame()
    return pd.DataFrame(rows).T.sort_index()


def matched(a: pd.DataFrame, b: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The two cells' [n, J] matrices over the seeds and problems both have (no NaN)."""
    if a.empty or b.empty:
        return np.empty((0, 0)), np.empty((0, 0))
    seeds = sorted(set(a.index) & set(b.index))
    problems = sorted(set(a.columns) & set(b.columns))
    x, y = a.loc[seeds, problems], b.loc[seeds, problems]
    keep = x.notna().all(axis=0) & y.notna().all(axis=0)
    return x.loc[:, keep].to_numpy(float), y.loc[:, keep].to_numpy(float)


def complete_matrix(cell: pd.DataFrame) -> np.ndarray:
    """A cell's [n, J] over the problems every seed has."""
    if cell.empty:
        return np.empty((0, 0))
    return cell.loc[:, cell.notna().all(axis=0)].to_numpy(float)
