"""The variance budget: where each arm's per-seed variance of final pass@1 comes from — eval
sampling noise (which more problems or samples cut, at eval cost only) or training (each seed's
trajectory, which only more seeds average out) — and the problem-sampling term the task-level
interval adds. `ablate plan` turns the same components into a design."""

from __future__ import annotations

import numpy as np

from ablate.report.data.load import StudyData
from ablate.report.data.table import Table, TableSpec
from ablate.report.stats import crossed, recipes
from ablate.report.stats import measures as m
from ablate.report.stats import problems as pr
from ablate.report.stats.design import variance_budget

#: Above this share of eval noise a bigger eval narrows the interval more cheaply than seeds.
EVAL_HEAVY = 0.3


def _sd(x: float) -> float | None:
    return float(np.sqrt(x)) if np.isfinite(x) else None


def _advice(share: float) -> str:
    if not np.isfinite(share):
        return ""
    if share > EVAL_HEAVY:
        return "eval-heavy: more problems or samples first"
    return "training-heavy: more seeds"


def budget_rows(data: StudyData) -> list[dict]:
    rates, k = pr.final_rates(data), data.eval_samples
    rows = []
    for cell in m.cells(data) if len(rates) else []:
        y = pr.complete_matrix(pr.cell_matrix(data, rates, *cell))
        if y.ndim != 2 or y.shape[0] < 2 or y.shape[1] < 2:
            continue
        b = variance_budget(y, k)
        c = crossed.crossed(y)
        rows.append(
            {
                "arm": cell[0],
                "base · template": f"{cell[1]} · {cell[2]}",
                "seeds × problems × samples": f"{y.shape[0]} × {y.shape[1]} × {k}",
                "per-seed SD": _sd(b.total),
                "eval noise SD": _sd(b.eval_noise),
                "training SD": _sd(b.training),
                "eval share": b.eval_share if np.isfinite(b.eval_share) else None,
                "problem-sampling SE": _sd(float(c.problem_var) / c.problems),
                **_recipe_cell(data, cell),
                "read as": _advice(b.eval_share),
            }
        )
    return rows


def _recipe_cell(data: StudyData, cell: tuple[str, str, str]) -> dict:
    """The recipe term (eval-recipe robustness declared): SD over recipes of the arm's pass@1."""
    if not len(data.recipes):
        return {}
    sd = recipes.recipe_sd(data, *cell)
    return {"eval-recipe SD": sd if np.isfinite(sd) else None}


def budget_table(data: StudyData) -> Table:
    caption = (
        "Variance budget of final pass@1 per arm (task-level reading): the SD over seeds of a "
        "seed's pass@1 on these problems, split into eval sampling noise (the binomial noise of "
        "K samples on each of J problems, estimated without bias from the per-problem records) "
        "and training noise (the rest: each seed's trajectory); eval share = eval noise / total "
        "variance. Problem-sampling SE = the standard error of the arm's mean from which "
        f"problems were drawn (σ_problem / √J). Eval share above {EVAL_HEAVY:g}: a bigger eval "
        "narrows the intervals more cheaply than seeds (`ablate plan` prices the designs). "
        "Eval-recipe SD (with declared eval recipes): the SD over recipes of the arm's mean "
        "pass@1, a term no seed or problem count removes."
    )
    return Table(caption, budget_rows(data))


def has_budget(data: StudyData) -> bool:
    return bool(data.eval_samples >= 2 and budget_rows(data))


TABLES = (TableSpec(name="variance_budget", build=budget_table, applies=has_budget),)
