"""Per-trial numbers read off the tidy frames of `load.StudyData` (pure pandas, no MLflow)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ablate.report.load import StudyData


def curve(history: pd.DataFrame, metric: str) -> pd.DataFrame:
    """trial_id, step, value of one metric, in step order."""
    rows = history[history["metric"] == metric]
    return rows[["trial_id", "step", "value"]].sort_values(["trial_id", "step"])


def final_value(history: pd.DataFrame, metric: str) -> pd.Series:
    """Value at each trial's last logged step (trial_id -> value)."""
    rows = curve(history, metric)
    return rows.groupby("trial_id")["value"].last()


def first_value(history: pd.DataFrame, metric: str) -> pd.Series:
    rows = curve(history, metric)
    return rows.groupby("trial_id")["value"].first()


def window_mean(history: pd.DataFrame, metric: str, start: float, stop: float) -> pd.Series:
    """Mean over the steps in the [start, stop] fraction of each trial's logged steps (e.g.
    0.75-1.0 = the last quarter): one noisy step does not decide a trend."""

    def one(rows: pd.DataFrame) -> float:
        n = len(rows)
        lo, hi = int(np.floor(start * (n - 1))), int(np.ceil(stop * (n - 1)))
        return float(rows["value"].iloc[lo : hi + 1].mean())

    rows = curve(history, metric)
    return rows.groupby("trial_id")[["value"]].apply(one) if len(rows) else pd.Series(dtype=float)


def trend(history: pd.DataFrame, metric: str, window: float = 0.25) -> pd.Series:
    """Last-window mean minus first-window mean, per trial."""
    late = window_mean(history, metric, 1 - window, 1.0)
    early = window_mean(history, metric, 0.0, window)
    return late - early


def by_seed(data: StudyData, values: pd.Series, arm: str, model: str, template: str) -> pd.Series:
    """Complete trials of one cell: seed -> value."""
    t = data.complete()
    t = t[(t["arm"] == arm) & (t["model"] == model) & (t["template"] == template)]
    return pd.Series(t["trial_id"].map(values).to_numpy(), index=t["seed"].to_numpy(), dtype=float)


def matched(a: pd.Series, b: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Values of the seeds present (and not NaN) in both."""
    seeds = sorted(set(a.dropna().index) & set(b.dropna().index))
    return a.loc[seeds].to_numpy(float), b.loc[seeds].to_numpy(float)


def cells(data: StudyData) -> list[tuple[str, str, str]]:
    """(arm, model, template) of the study's grid in the study's order."""
    keys = data.trials[["arm", "model", "template"]].drop_duplicates()
    return [tuple(r) for r in keys.itertuples(index=False)]


def eval_ks(history: pd.DataFrame) -> list[int]:
    ks = {
        int(m.rsplit("_", 1)[1])
        for m in history["metric"].unique()
        if m.startswith("eval/pass_at_")
    }
    return sorted(ks)


def per_problem_accuracy(data: StudyData, arm: str, model: str, template: str, seeds) -> pd.Series:
    """problem_id -> mean correctness over samples and the given seeds, at each trial's final
    eval step."""
    s = data.samples
    s = s[(s["arm"] == arm) & (s["model"] == model) & (s["template"] == template)]
    s = s[s["seed"].isin(list(seeds)) & s["trial_id"].isin(data.complete()["trial_id"])]
    if not len(s):
        return pd.Series(dtype=float)
    last = s.groupby("trial_id")["step"].transform("max")
    s = s[s["step"] == last]
    return s.groupby("problem_id")["correct"].mean().astype(float)
