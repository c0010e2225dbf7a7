"""The record pass before compute covers `TuneSpec` and `Recipes` like `Budget` (issue 63): sizes
against the model and the memory, fields a range cannot tune, duplicates and types are each one
line, raised when the study is built or by its preflight, before a results store, a tuning
trial or a trial exists; and the opening's estimate counts the tuning and eval-recipe phases."""

from __future__ import annotations

import dataclasses
import warnings

import pytest

from ablate import (
    Budget,
    ConfigError,
    EvalSpec,
    Recipes,
    Study,
    StudyError,
    TuneSpec,
    arm,
    linear_range,
    log_range,
)
from ablate.commands.cli import main
from ablate.commands.opening import opening_lines
from ablate.study.runner import run_study
from ablate.study.tuning import MAX_TRIALS, recipe_size_problem
from ablate.testing import zoo_model_built

pytestmark = [
    pytest.mark.filterwarnings("ignore:each eval reads 3 problems"),
    pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy:DeprecationWarning"),
]

LR = {"lr": log_range(1e-6, 1e-4)}
EVAL = EvalSpec(at_start=False, max_problems=3, n_samples=2, ks=(1,))


def _study(**changes) -> Study:
    fields = dict(
        name="records",
        base_models=["hopeless"],
        arms=[arm("grpo", "grpo", kl_coef=0.0)],
        seeds=[0],
        budget=Budget(max_steps=2, prompts_per_step=2, group_size=2, max_new_tokens=8),
        eval=EVAL,
        passk=None,
    )
    return Study(**(fields | changes))


def _tune(**changes) -> TuneSpec:
    return TuneSpec(**(dict(params=LR, trials=2, steps=2, selection_problems=3) | changes))


def _refused_by_the_study(match: str, **changes) -> str:
    """The one-line StudyError building the study raises (so nothing of it can run)."""
    with pytest.raises(StudyError, match=match) as caught:
        _study(**changes)
    assert "\n" not in str(caught.value)
    return str(caught.value)


def _refused_before_compute(study: Study, tmp_path, match: str) -> str:
    """The one-line ConfigError `run_study` raises, with no results folder, store or trial
    made (the preflight runs before any of them)."""
    if not zoo_model_built("hopeless"):
        pytest.skip("zoo model 'hopeless' not built (ablate zoo build ladder)")
    results = tmp_path / "results"
    with pytest.raises(ConfigError, match=match) as caught:
        run_study(study, results_dir=results)
    assert "\n" not in str(caught.value)
    assert not results.exists()  # no store (mlflow.db), no tuning trial, no trial folder
    return str(caught.value)


def test_a_recipe_token_limit_beyond_the_models_positions_is_refused_before_compute(tmp_path):
    study = _study(eval=dataclasses.replace(EVAL, robustness=Recipes(max_new_tokens=(10**8,))))
    message = _refused_before_compute(study, tmp_path, r"Recipes: max_new_tokens=100,000,000")
    assert "eval.robustness" in message and "positions: use at most" in message


def test_ablate_run_says_the_recipe_refusal_in_one_line_rc_2(tmp_path, capsys):
    if not zoo_model_built("hopeless"):
        pytest.skip("zoo model 'hopeless' not built (ablate zoo build ladder)")
    file = tmp_path / "huge_recipe.py"
    file.write_text(
        "from ablate.study import Budget, EvalSpec, Recipes, Study, arm\n"
        "STUDY = Study(name='huge_recipe', base_models=['hopeless'], arms=[arm('grpo', 'grpo')],\n"
        "    seeds=[0], passk=None, budget=Budget(max_steps=2, prompts_per_step=2, group_size=2,\n"
        "    max_new_tokens=8), eval=EvalSpec(max_problems=300, n_samples=1, ks=(1,),\n"
        "    robustness=Recipes(max_new_tokens=(10**8,))))\n"
    )
    results = tmp_path / "r"
    args = ["run", str(file), "--results", str(results), "--out", str(tmp_path / "out")]
    assert main(args) == 2
    captured = capsys.readouterr()
    said = [line for line in captured.err.splitlines() if line.strip()]
    assert len(said) == 1 and "max_new_tokens=100,000,000" in said[0]
    assert "Traceback" not in captured.err + captured.out and not results.exists()


def test_a_recipe_limit_beyond_memory_is_refused_with_the_largest_that_fits():
    limits = {"positions": 10**7, "vocab": 150_000, "hidden_bytes": 4096, "weight_bytes": 10**9}
    memory = (16 * 10**9, "this machine's RAM")
    message = recipe_size_problem(10**6, 8, "big", limits, memory)
    assert message.startswith("eval.robustness: Recipes: max_new_tokens=1,000,000 is more than")
    most = int(message.rpartition("use at most ")[2].replace(",", ""))
    assert recipe_size_problem(most, 8, "big", limits, memory) is None
    assert recipe_size_problem(most + 1, 8, "big", limits, memory) is not None


@pytest.mark.parametrize(
    ("name", "dim"),
    [
        ("minibatches", linear_range(1, 4)),  # an integer
        ("loss_agg", linear_range(0, 1)),  # a choice
        ("loss_agg", ["token_mean", "seq_mean_token_mean"]),
        ("betas", linear_range(0.9, 0.99)),  # a pair
    ],
)
def test_a_field_a_range_cannot_tune_is_refused_when_the_study_is_built(name, dim):
    message = _refused_by_the_study(
        rf"tune: '{name}' \(.+\) cannot be tuned", tune=_tune(params={name: dim})
    )
    assert "tunable: Optim's lr, weight_decay, grad_clip and Algorithm's" in message
    assert "kl_coef" in message and "minibatches," not in message


def test_a_range_an_arm_refuses_at_one_end_is_refused_when_the_study_is_built():
    message = _refused_by_the_study(
        r"tune: 'kl_coef' range \[-1, 1\]", tune=_tune(params={"kl_coef": linear_range(-1, 1)})
    )
    assert "arm 'grpo' refuses kl_coef=-1" in message
    _refused_by_the_study(r"tune: 'lr' range", tune=_tune(params={"lr": linear_range(-1, 1)}))


def test_more_selection_problems_than_the_train_split_is_refused_before_compute(tmp_path):
    study = _study(tune=_tune(selection_problems=10**7))
    message = _refused_before_compute(study, tmp_path, r"tune: selection_problems=10,000,000")
    assert "20,000 train problems" in message and "use at most 19,999" in message


def test_an_absurd_number_of_tuning_trials_is_refused_when_the_study_is_built():
    message = _refused_by_the_study(
        r"tune: trials=1,000,000,000 settings", tune=_tune(trials=10**9)
    )
    assert f"is more than the {MAX_TRIALS:,} a tuning phase may try" in message


def test_an_absurd_tuning_time_is_said_when_the_study_is_built():
    with pytest.warns(UserWarning, match=r"tune: .* of steps=1,000,000,000 imply about"):
        _study(tune=_tune(trials=MAX_TRIALS, steps=10**9))


def test_the_opening_estimate_counts_the_tuning_and_recipe_phases():
    plain = _study(eval=dataclasses.replace(EVAL, max_problems=None))
    full = dataclasses.replace(
        plain,
        tune=_tune(trials=4, steps=20, seeds=(1, 2)),
        eval=dataclasses.replace(plain.eval, robustness=Recipes(temperatures=(0.5,))),
    )
    before, after = opening_lines(plain, 1), opening_lines(full, 1)
    assert "tuning" not in " ".join(before) and "recipe" not in " ".join(before)
    assert any(line.startswith("before the trials, the tuning phase: 1 arm × 4 trials × 2 seeds "
                               "= 8 runs of 20 steps") for line in after)  # fmt: skip
    assert any(line.startswith("after the trials, the eval-recipe phase: 1 final checkpoint × "
                               "2 recipes") for line in after)  # fmt: skip
    estimate = after[-1]
    assert estimate.startswith("estimated: about ") and "of tuning, trials and eval recipes" in (
        estimate
    )
    assert "of tuning" in estimate and "of eval recipes" in estimate
    assert before[-1].startswith("estimated: about 0s of trials")
    assert not estimate.startswith("estimated: about 0s")


@pytest.mark.parametrize(
    ("staleness", "changes", "field"),
    [
        (10**9, {}, "Budget.max_steps=2"),
        (10, {"budget": Budget(max_steps=50), "tune": _tune(steps=2)}, "TuneSpec.steps=2"),
    ],
)
def test_a_staleness_the_sampler_never_reaches_is_refused_when_the_study_is_built(
    staleness, changes, field
):
    arms = [arm("grpo", "grpo", kl_coef=0.0, rollout_staleness=staleness)]
    message = _refused_by_the_study(
        rf"arm 'grpo': rollout_staleness={staleness:,} is not below {field}", arms=arms, **changes
    )
    assert "never take the trainer's weights" in message
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _study(arms=[arm("grpo", "grpo", kl_coef=0.0, rollout_staleness=1)])  # a lag reached


def test_duplicate_tuning_seeds_are_refused_when_the_study_is_built():
    _refused_by_the_study(r"tune: duplicate seeds in seeds=\(0, 0\)", tune=_tune(seeds=(0, 0)))
    _refused_by_the_study(r"tune: duplicate seeds", tune=_tune(seeds=[3, 1, 3]))


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"tune": {"params": LR, "trials": 2}}, r"tune=\{'params'.* must be a TuneSpec\(\.\.\.\)"),
        (
            {"eval": dataclasses.replace(EVAL, robustness={"max_new_tokens": (10,)})},
            r"eval.robustness=\{'max_new_tokens': \(10,\)\} must be a Recipes\(\.\.\.\)",
        ),
    ],
)
def test_a_tune_or_recipes_of_another_type_is_a_typed_error(changes, match):
    _refused_by_the_study(match, **changes)
