"""Per-trial numbers read off the tidy frames of `data.load.StudyData` (pure pandas, no MLflow)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ablate.report.data.load import StudyData


def curve(history: pd.DataFrame, metric: str) -> pd.DataFrame:
    """trial_id, step, value of one metric, in step order."""
    rows = history[history["metric"] == metric]
    return rows[["trial_id", "step", "value"]].sort_values(["trial_id", "step"])


def final_value(history: pd.DataFrame, metric: str) -> pd.Series:
    """Value at each trial's last logged step (trial_id -> value)."""
    rows = curve(history, metric)
    return rows.groupby("trial_id")["value"].last()


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


#: How a diverged trial enters the report (never silently dropped): divergence is its own
#: outcome (`stats.divergence`). The headline contrasts read Δ among the seeds where both arms
#: survived beside the divergence rates' exact test and the hurdle Δ; measures that do not
#: separate the two count a diverged trial as pass@k = 0 (`headline`): its policy is broken
#: (non-finite weights), so it solves nothing. Failed trials (an infrastructure or data error,
#: not the algorithm's doing) and missing ones are listed and left out.
DIVERGED_RULE = (
    "divergence is its own outcome: the headline's Δ is read among the seeds where both arms "
    "survived, beside the divergence rates (Boschloo's exact test) and the hurdle Δ (a "
    "diverged trial as pass@1 = 0); measures that do not separate the two count a diverged "
    "trial as pass@k = 0 (its policy has non-finite weights and solves nothing); failed and "
    "missing trials are listed, not averaged"
)


def headline(data: StudyData, values: pd.Series) -> pd.Series:
    """`values` (an eval pass@k per trial) with every diverged trial set to 0: the hurdle
    reading (DIVERGED_RULE)."""
    out = values.astype(float).copy()
    for trial_id in data.diverged()["trial_id"]:
        out.loc[trial_id] = 0.0
    return out


def by_seed(
    data: StudyData,
    values: pd.Series,
    arm: str,
    model: str,
    template: str,
    *,
    with_diverged: bool = False,
) -> pd.Series:
    """One cell's complete trials (and diverged ones, for headline values): seed -> value."""
    t = data.trials
    keep = t["complete"] | (t["outcome"] == "diverged") if with_diverged else t["complete"]
    t = t[keep & (t["arm"] == arm) & (t["model"] == model) & (t["template"] == template)]
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


def eval_by_tokens(history: pd.DataFrame) -> pd.DataFrame:
    """trial_id, step, value (eval pass@1), tokens (generated training tokens at that eval)."""
    acc = curve(history, "eval/pass_at_1")
    tok = curve(history, "eval/budget_generated_tokens").rename(columns={"value": "tokens"})
    return acc.merge(tok, on=["trial_id", "step"])


def _cell_ids(data: StudyData, model: str, template: str) -> pd.Series:
    t = data.complete()
    return t[(t["model"] == model) & (t["template"] == template)]["trial_id"]


def at_equal_tokens(data: StudyData, model: str, template: str) -> tuple[pd.Series, float, str]:
    """trial_id -> eval pass@1 at the same generated-token count for every complete trial of
    the cell, the count, and how it was read. With a token eval cadence (`eval/token_mark`) the
    count is the largest mark every trial reached and each value is the eval made on reaching
    it; without one, pass@1 is interpolated linearly between evals at the smallest final count."""
    ids = _cell_ids(data, model, template)
    acc = curve(data.history, "eval/pass_at_1")
    acc = acc[acc["trial_id"].isin(ids)]
    marks = curve(data.history, "eval/token_mark")
    marks = marks[marks["trial_id"].isin(ids)]
    if len(marks) and set(marks["trial_id"]) == set(acc["trial_id"]):
        first, mark = _mark_steps(marks)
        at = acc.merge(first.rename("at").reset_index(), on="trial_id")
        values = at[at["step"] == at["at"]].set_index("trial_id")["value"]
        return values, mark, "eval made on reaching the mark"
    joined = eval_by_tokens(data.history)
    joined = joined[joined["trial_id"].isin(ids)]
    if not len(joined):
        return pd.Series(dtype=float), float("nan"), "no evals"
    budget = float(joined.groupby("trial_id")["tokens"].max().min())
    values = joined.groupby("trial_id")[["tokens", "value"]].apply(
        lambda g: float(np.interp(budget, g["tokens"], g["value"]))
    )
    return values, budget, "interpolated between evals (no token eval cadence)"


def _mark_steps(marks: pd.DataFrame) -> tuple[pd.Series, float]:
    """trial_id -> the step of the eval made on reaching the largest mark all trials reached."""
    mark = float(marks.groupby("trial_id")["value"].max().min())
    return marks[marks["value"] >= mark].groupby("trial_id")["step"].min(), mark


def token_mark_steps(data: StudyData, model: str, template: str) -> pd.Series | None:
    """trial_id -> the eval step at the cell's common token mark (None without a token eval
    cadence on every trial of the cell: the equal-token values are then interpolated)."""
    ids = _cell_ids(data, model, template)
    marks = curve(data.history, "eval/token_mark")
    marks = marks[marks["trial_id"].isin(ids)]
    acc = curve(data.history, "eval/pass_at_1")
    if not len(marks) or set(marks["trial_id"]) != set(acc[acc["trial_id"].isin(ids)]["trial_id"]):
        return None
    return _mark_steps(marks)[0]


def gain_per_million_tokens(data: StudyData) -> pd.Series:
    """trial_id -> (final − step-0 eval pass@1) per million generated training tokens (dynamic
    sampling's discarded samples included): sample efficiency."""
    p1 = curve(data.history, "eval/pass_at_1")
    first = p1[p1["step"] == 0].set_index("trial_id")["value"]
    gain = final_value(data.history, "eval/pass_at_1") - first
    tokens = final_value(data.history, "budget/generated_tokens")
    return (gain / (tokens / 1e6)).replace([np.inf, -np.inf], np.nan).dropna()


def tokens_per_step(data: StudyData) -> pd.Series:
    """trial_id -> generated tokens per RL step (all generation batches)."""
    tokens = curve(data.history, "budget/generated_tokens")
    last = tokens.groupby("trial_id").last()
    return (last["value"] / last["step"].clip(lower=1)).astype(float)


# --- base-model values and RL gains (claims 4 and 6, the gain figure) -------------------------
def base_value(data: StudyData, k: int) -> pd.Series:
    """trial_id -> base pass@k: the trial's own step-0 eval when it has one, else passk.csv."""
    first = data.history[data.history["metric"] == f"eval/pass_at_{k}"]
    first = first[first["step"] == 0].set_index("trial_id")["value"]
    out = pd.Series(np.nan, index=data.trials["trial_id"].to_numpy())
    held = first.index.intersection(out.index)
    if len(held):  # none: an empty object Series cannot be set into floats
        out.loc[held] = first.loc[held].astype(float)
    p = data.passk
    if len(p):
        p = p[p["k"] == k].set_index(["model", "template"])["pass_at_k"]
        for _, t in data.trials.iterrows():
            if np.isnan(out[t["trial_id"]]) and (t["model"], t["template"]) in p.index:
                out[t["trial_id"]] = p[(t["model"], t["template"])]
    return out


def base_pass_at_g(data: StudyData) -> pd.Series:
    """trial_id -> base Pass@G, passk.csv (the Pass@G phase) first, else step-0 eval."""
    g, out = data.group_size, pd.Series(np.nan, index=data.trials["trial_id"].to_numpy())
    p = data.passk
    if len(p) and g in set(p["k"]):
        table = p[p["k"] == g].set_index(["model", "template"])["pass_at_k"]
        for _, t in data.trials.iterrows():
            out[t["trial_id"]] = table.get((t["model"], t["template"]), np.nan)
    return out.fillna(base_value(data, g)) if g else out


def gains(data: StudyData, k: int) -> pd.Series:
    """trial_id -> final eval pass@k − base pass@k (complete trials)."""
    final = final_value(data.history, f"eval/pass_at_{k}")
    ids = data.complete()["trial_id"]
    return (final.reindex(ids) - base_value(data, k).reindex(ids)).dropna()
