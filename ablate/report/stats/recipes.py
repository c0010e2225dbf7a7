"""Eval-recipe robustness of the primary verdicts: each primary contrast read again under every
eval recipe the study declared (`EvalSpec(robustness=Recipes(...))`, the final checkpoints
re-evaluated by `ablate.study.recipe_phase`), with the same task-level reading (crossed seed ×
problem, `contrasts.task_contrast`), Holm over the family within each recipe and the same three
verdicts. A contrast *survives the eval recipe* when its verdict is the headline's under every
recipe; otherwise the first recipe that flips it is named.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ablate.report.data.load import StudyData
from ablate.report.stats import contrasts as cx
from ablate.report.stats import inference


@dataclass(frozen=True)
class RecipeVerdict:
    arm: str
    reference: str
    cell: str
    recipe: str
    diff: float
    p_holm: float
    verdict: str


@dataclass(frozen=True)
class Survival:
    row: cx.ContrastRow
    verdicts: list[RecipeVerdict]
    recipe_sd: float  # SD over recipes of Δ pass@1

    @property
    def flips(self) -> list[RecipeVerdict]:
        return [v for v in self.verdicts if v.verdict != self.row.verdict]

    @property
    def survives(self) -> bool:
        return bool(self.verdicts) and not self.flips

    def text(self) -> str:
        if not self.verdicts:
            return "–"
        if self.survives:
            return f"survives ({len(self.verdicts)} recipes)"
        first = self.flips[0]
        return f"does not survive: {first.verdict} under {first.recipe}"


def has_recipes(data: StudyData) -> bool:
    return len(data.recipes) > 0 and bool(cx.primary_contrasts(data))


def _matrix(frame: pd.DataFrame, arm: str, model: str, template: str) -> pd.DataFrame:
    """seed × problem pass rates of one arm's cell under one recipe."""
    rows = frame[
        (frame["arm"] == arm) & (frame["model"] == model) & (frame["template"] == template)
    ]
    return rows.pivot_table(index="seed", columns="problem_id", values="rate")


def _recipe_verdicts(data: StudyData, rows: list[cx.ContrastRow], recipe: str) -> list:
    frame = data.recipes[data.recipes["recipe"] == recipe]
    tests = []
    for r in rows:
        a = _matrix(frame, r.arm, r.model, r.template)
        b = _matrix(frame, r.reference, r.model, r.template)
        seeds = a.index.intersection(b.index)
        problems = a.columns.intersection(b.columns)
        x, y = a.loc[seeds, problems].to_numpy(), b.loc[seeds, problems].to_numpy()
        if len(seeds) >= inference.MIN_SEEDS and len(problems) >= 2:
            c, i90 = cx.task_contrast(x, y)
            tests.append((r, float(c.diff.value), float(c.p_value), i90))
        else:
            tests.append((r, float(np.nanmean(x - y)) if x.size else np.nan, np.nan, None))
    adjusted = inference.holm([t[2] for t in tests]) if tests else []
    out = []
    for (r, diff, _, i90), p in zip(tests, adjusted, strict=True):
        verdict = cx.verdict(float(p), i90, r.margin) if i90 is not None else ""
        out.append(RecipeVerdict(r.arm, r.reference, r.cell, recipe, diff, float(p), verdict))
    return out


def survival(data: StudyData) -> list[Survival]:
    """Per primary contrast: its verdict under every recipe and whether it survives them."""
    rows = cx.primary_contrasts(data)
    recipes = list(dict.fromkeys(data.recipes["recipe"]))
    by_recipe = [_recipe_verdicts(data, rows, recipe) for recipe in recipes]
    out = []
    for i, row in enumerate(rows):
        verdicts = [vs[i] for vs in by_recipe]
        diffs = np.array([v.diff for v in verdicts], dtype=float)
        sd = float(np.nanstd(diffs, ddof=1)) if np.isfinite(diffs).sum() >= 2 else float("nan")
        out.append(Survival(row, verdicts, sd))
    return out


def recipe_sd(data: StudyData, arm: str, model: str, template: str) -> float:
    """SD over recipes of the arm's mean pass@1 in its cell (the recipe term of its variance)."""
    r = data.recipes
    cell = r[(r["arm"] == arm) & (r["model"] == model) & (r["template"] == template)]
    means = cell.groupby("recipe")["rate"].mean()
    return float(means.std(ddof=1)) if len(means) >= 2 else float("nan")
