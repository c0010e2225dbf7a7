"""Eval-recipe robustness: a recipe grid expands as declared, a study's recipes are not part of
its trials' identity, and a verdict that one recipe flips is reported as not surviving (naming
the recipe), one that holds everywhere as surviving, with the recipe term in the variance budget."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ablate import EvalSpec, Study, StudyError, arm
from ablate.baselines import baseline
from ablate.factors.eval_spec import Recipes
from ablate.report.render import budget, robustness
from ablate.testing.studies import study_data

SEEDS, J, K = range(4), 24, 4


def test_recipes_expand_the_declared_grid_with_the_studys_own_recipe_first():
    recipes = Recipes(decode_seeds=2, templates=("plain_q",), temperatures=(0.6,))
    labels = [r.label for r in recipes.expand("plain", 1.0, 80)]
    assert len(labels) == 2 * 2 * 1 * 2
    assert labels[0] == "plain · T=1 · 80 tok · seed 0"
    assert "plain_q · T=0.6 · 80 tok · seed 1" in labels


def test_recipes_leave_trial_ids_unchanged_and_bad_ones_are_one_line():
    def study(**eval_):
        return Study(
            name="r", base_models=["hopeless"], arms=[arm("grpo", "grpo")], passk=None,
            eval=EvalSpec(**eval_),
        )  # fmt: skip

    plain, robust = study(), study(robustness=Recipes(decode_seeds=3, temperatures=(0.6,)))
    assert [t.id for t in plain.trials()] == [t.id for t in robust.trials()]
    with pytest.raises(StudyError, match="unknown template 'nope'") as caught:
        study(robustness=Recipes(templates=("nope",)))
    assert "\n" not in str(caught.value)


def _rates(rng, p: float) -> np.ndarray:
    return (rng.random((J, K)) < rng.uniform(p - 0.15, p + 0.15, size=(J, 1))).astype(int)


def _data():
    """`better` beats `grpo` by ~0.4 at the study's recipe and `noise` does not; under the recipe
    "T=0.3" `better` is no better than `grpo` (its verdict flips)."""
    rng = np.random.default_rng(0)
    levels = {"grpo": 0.3, "better": 0.7, "noise": 0.3}
    samples = {(a, s): _rates(rng, p) for a, p in levels.items() for s in SEEDS}
    runs = [
        (a, "m", s, {"eval/pass_at_1": [0.2, float(samples[(a, s)].mean())]})
        for a in levels
        for s in SEEDS
    ]
    algos = {a: baseline("grpo") for a in levels}
    recipes = []
    for (a, s), y in samples.items():
        flipped = samples[("grpo", s)] if a == "better" else y  # T=0.3: better = the reference
        for recipe, matrix in (("study", y), ("T=0.3", flipped)):
            recipes += [
                {"trial_id": f"{a}{s}", "arm": a, "model": "m", "template": "plain", "seed": s}
                | {"recipe": recipe, "problem_id": f"p{j}", "rate": float(matrix[j].mean())}
                for j in range(J)
            ]
    return study_data(
        runs,
        algorithms=algos,
        reference="grpo",
        samples=samples,
        eval_samples=K,
        recipes=pd.DataFrame(recipes),
    )


def test_a_verdict_one_recipe_flips_does_not_survive_and_the_recipe_is_named():
    data = _data()

    rows = {r["arm"]: r for r in robustness.robustness_table(data).rows}

    assert rows["better"]["verdict (headline)"] == "different"
    assert rows["better"]["survives the eval recipe"].startswith("does not survive: ")
    assert rows["better"]["survives the eval recipe"].endswith(" under T=0.3")
    assert rows["noise"]["survives the eval recipe"] == "survives (2 recipes)"
    assert rows["better"]["recipe SD of Δ"] > 0.2  # Δ ≈ 0.4 under one recipe, 0 under the other
    per_recipe = robustness.recipe_verdict_table(data).rows
    assert {(r["arm"], r["recipe"]): r["verdict"] for r in per_recipe}[
        ("better", "study")
    ] == "different"
    assert {(r["arm"], r["recipe"]): r["Δ pass@1"] for r in per_recipe}[
        ("better", "T=0.3")
    ] == pytest.approx(0.0)
    terms = {r["arm"]: r["eval-recipe SD"] for r in budget.budget_rows(data)}
    assert terms["better"] > 0.2 and terms["noise"] == pytest.approx(0.0)


@pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:each eval reads 3 problems")
def test_the_final_checkpoints_are_evaluated_under_every_recipe_once(tmp_path):
    from ablate import Budget
    from ablate.report.data.load import load_study_data
    from ablate.study.runner import run_study
    from ablate.testing import zoo_model_built

    if not zoo_model_built("hopeless"):
        pytest.skip("zoo model 'hopeless' not built (ablate zoo build ladder)")
    study = Study(
        name="robust",
        base_models=["hopeless"],
        arms=[arm("grpo", "grpo", kl_coef=0.0)],
        seeds=[0, 1],
        budget=Budget(max_steps=1, prompts_per_step=2, group_size=2, max_new_tokens=8),
        eval=EvalSpec(
            at_start=False, max_problems=3, n_samples=2, ks=(1,),
            robustness=Recipes(decode_seeds=2, temperatures=(0.5,)),
        ),
        passk=None,
    )  # fmt: skip
    results = tmp_path / "results"

    run_study(study, results_dir=results)

    table = pd.read_csv(results / "robust" / "recipes.csv")
    assert table.groupby(["seed", "recipe"]).size().to_dict() == {
        (s, f"plain · T={t} · 8 tok · seed {d}"): 3
        for s in (0, 1)
        for t in (1, 0.5)
        for d in (0, 1)
    }
    files = sorted((results / "robust" / "recipes").rglob("*.json"))
    stamps = [f.stat().st_mtime_ns for f in files]
    run_study(study, results_dir=results)  # a rerun evaluates nothing again
    assert [f.stat().st_mtime_ns for f in files] == stamps and len(files) == 8
    assert len(load_study_data(study, results).recipes) == 24
