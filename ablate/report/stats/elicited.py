"""RL gains over the best-elicited base (`ablate.trial.elicitation`), problem by problem.

An arm's final eval is a seed × problem matrix of pass rates; the base under each elicitation
role is one rate per eval problem (chosen on the selection split, measured on these problems).
The gain over a base is the matrix minus the base's row, read at task level with the crossed
seed × problem interval (`crossed.estimate`): the base's own sampling noise is part of each
problem's column, which the crossed interval's problem term carries.

The format share of a gain says how much of "RL gain over the as-trained base" a setting alone
already gives: (base under the setting − as-trained base) / (final − as-trained base).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ablate.report.stats import crossed, inference

AS_TRAINED, LENIENT, BEST_PROMPT, BEST = "as_trained", "lenient", "best_prompt", "best"
ROLES = (AS_TRAINED, LENIENT, BEST_PROMPT, BEST)
SHARES = {LENIENT: "lenient parse", BEST_PROMPT: "best prompt", BEST: "best elicited"}
ALL = "*"


@dataclass(frozen=True)
class ElicitedBase:
    """One base model's eval rates per role for one study template."""

    rates: dict[str, pd.Series] = field(default_factory=dict)  # role -> problem_id -> rate
    labels: dict[str, str] = field(default_factory=dict)  # role -> the grid point, in words

    def mean(self, role: str) -> float:
        r = self.rates.get(role)
        return float(r.mean()) if r is not None and len(r) else float("nan")


def elicited_base(elicitation: pd.DataFrame, model: str, template: str) -> ElicitedBase | None:
    """The eval rates of `model` under each role for trials of `template`; None without any."""
    if elicitation.empty:
        return None
    e = elicitation[(elicitation["model"] == model) & (elicitation["split"] == "eval")]
    e = e[e["for_template"].isin([template, ALL])]
    if e.empty:
        return None
    rates, labels = {}, {}
    for role, rows in e.groupby("role", sort=False):
        rates[role] = rows.set_index(rows["problem_id"].astype(str))["rate"].astype(float)
        first = rows.iloc[0]
        shots = f" + {int(first['shots'])}-shot" if int(first["shots"]) else ""
        labels[role] = (
            f"{first['template']}{shots}, T={float(first['temperature']):g}, {first['parse']}"
        )
    return ElicitedBase(rates, labels)


def gain_over(final: pd.DataFrame, base: pd.Series) -> inference.Estimate:
    """Task-level mean of final − base over the seeds and the problems both have, with the
    crossed 95% interval (a mean only with one seed or one problem)."""
    problems = [p for p in final.columns if p in base.index]
    if final.empty or not problems:
        return inference.Estimate(float("nan"), float("nan"), float("nan"), 0)
    y = final[problems].to_numpy(float) - base.loc[problems].to_numpy(float)[None, :]
    y = y[:, ~np.isnan(y).any(axis=0)]
    if y.shape[0] < 2 or y.shape[1] < 2:
        mean = float(np.mean(y)) if y.size else float("nan")
        return inference.Estimate(mean, float("nan"), float("nan"), y.shape[0])
    return crossed.estimate(y)


def shares(final_mean: float, base: ElicitedBase) -> dict[str, float]:
    """role -> its share of the gain over the as-trained base (NaN when that gain is not
    positive: a share of no gain is undefined)."""
    start = base.mean(AS_TRAINED)
    gain = final_mean - start
    if not (np.isfinite(gain) and gain > 0):
        return {role: float("nan") for role in SHARES}
    return {role: (base.mean(role) - start) / gain for role in SHARES}
