"""The eval-recipe robustness tables (`stats.recipes`): per primary contrast, whether its verdict
survives every declared eval recipe (or which recipe flips it), and its verdict under each."""

from __future__ import annotations

import numpy as np

from ablate.report.data.load import StudyData
from ablate.report.data.table import Table, TableSpec
from ablate.report.stats import recipes as rc


def _number(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def robustness_table(data: StudyData) -> Table:
    rows = []
    for s in rc.survival(data):
        diffs = [v.diff for v in s.verdicts if np.isfinite(v.diff)]
        counts = {
            v: sum(x.verdict == v for x in s.verdicts)
            for v in dict.fromkeys(x.verdict for x in s.verdicts)
        }
        rows.append(
            {
                "arm": s.row.arm,
                "base · template": s.row.cell,
                "verdict (headline)": s.row.verdict or "–",
                "verdicts over recipes": ", ".join(f"{v or '–'} ×{n}" for v, n in counts.items()),
                "Δ lowest": _number(min(diffs)) if diffs else None,
                "Δ highest": _number(max(diffs)) if diffs else None,
                "recipe SD of Δ": _number(s.recipe_sd),
                "survives the eval recipe": s.text(),
            }
        )
    caption = (
        "Does each primary verdict survive a change of eval recipe? Every final checkpoint "
        "re-evaluated (not retrained) under each declared recipe (template · temperature · "
        "token limit · decode seed); each recipe read like the headline (task-level, Holm over "
        "the family within the recipe). Survives: the headline's verdict under every recipe; "
        "otherwise the first recipe that flips it. Recipe SD of Δ: the contrast's spread over "
        "recipes."
    )
    return Table(caption, rows)


def recipe_verdict_table(data: StudyData) -> Table:
    rows = [
        {
            "arm": v.arm,
            "recipe": v.recipe,
            "Δ pass@1": _number(v.diff),
            "p (Holm)": _number(v.p_holm),
            "verdict": v.verdict or "–",
        }
        for s in rc.survival(data)
        for v in s.verdicts
    ]
    caption = "Each primary contrast's verdict under each eval recipe (arm − reference)."
    return Table(caption, rows)


TABLES = (
    TableSpec(name="robustness", build=robustness_table, applies=rc.has_recipes),
    TableSpec(name="robustness_recipes", build=recipe_verdict_table, applies=rc.has_recipes),
)
