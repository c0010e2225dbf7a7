"""`ablate tune`: a real (tiny) search logged to MLflow, and MedianPruner stopping a clearly worse
trial of a stub trainer."""

from __future__ import annotations

import optuna
import pytest

import ablate.study.tune
from ablate.base.errors import StudyError
from ablate.commands.cli import main
from ablate.study import Budget, EvalSpec, SearchSpace, Study, arm
from ablate.testing import zoo_model_built
from ablate.tracking import open_store
from ablate.trial import TrialResult

pytestmark = pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy:DeprecationWarning")

BUDGET = Budget(max_steps=2, prompts_per_step=2, group_size=2, max_new_tokens=16)

STUDY_FILE = """
from ablate.study import Budget, EvalSpec, SearchSpace, Study, arm

STUDY = Study(
    name="tiny",
    base_models=["hopeless"],
    arms=[arm("grpo", "grpo"), arm("gspo", "gspo")],
    reference="gspo",
    seeds=[3, 4],
    budget=Budget(max_steps=2, prompts_per_step=2, group_size=2, max_new_tokens=16),
    eval=EvalSpec(every=1, at_start=False, max_problems=2, n_samples=2, ks=(1,)),
    passk=None,
    search={"lr": SearchSpace(low=1e-5, high=1e-4, log=True, target="optim")},
)
"""


def test_tune_cli_runs_and_logs_each_trial(tmp_path, capsys):
    if not zoo_model_built("hopeless"):
        pytest.skip("zoo model 'hopeless' not built (ablate zoo build ladder)")
    study_file = tmp_path / "tiny.py"
    study_file.write_text(STUDY_FILE)
    results = tmp_path / "results"

    code = main(["tune", str(study_file), "--trials", "3", "--results", str(results)])

    out = capsys.readouterr().out
    assert code == 0, out
    assert 'best params: {"lr": ' in out
    table = open_store(f"sqlite:///{results / 'mlflow.db'}").runs("tiny-tune")
    runs = table.runs
    assert len(runs) == 3 and set(runs["status"]) == {"FINISHED"}
    assert runs["trial_id"].nunique() == 3
    lrs = table.params["optim.lr"].astype(float)
    assert lrs.between(1e-5, 1e-4).all() and lrs.nunique() == 3
    # every tune trial is the reference arm (gspo) on the first seed
    assert set(runs["arm"]) == {"gspo"} and set(runs["seed"]) == {3}
    search = optuna.load_study(study_name="tiny-tune", storage=f"sqlite:///{results / 'optuna.db'}")
    assert [t.state.name for t in search.trials] == ["COMPLETE"] * 3
    # the periodic eval (every=1) was reported to the pruner at step 1
    assert all(set(t.intermediate_values) == {1} for t in search.trials)


def _stub_study(**search: SearchSpace) -> Study:
    return Study(
        name="stub",
        base_models=["hopeless"],
        arms=[arm("grpo", "grpo")],
        budget=BUDGET,
        eval=EvalSpec(every=1, at_start=False, max_problems=2, n_samples=2, ks=(1,)),
        passk=None,
        search=search or {"lr": SearchSpace(choices=[1e-5, 3e-5], target="optim")},
    )


def test_median_pruner_stops_a_clearly_worse_trial(tmp_path, monkeypatch):
    quality = iter([0.8, 0.7, 0.1])  # the third trial is far below the median at every eval
    reached: list[int] = []

    def fake_train(spec, *, tracker, run_dir, progress):
        value = next(quality)
        for step in range(1, 11):
            reached.append(step)
            progress(step, 10, {"eval/pass_at_1": value, "reward/mean": value})
        return TrialResult(spec.id, "finished", 10, final_eval={"eval/pass_at_1": value})

    monkeypatch.setattr(ablate.study.tune, "train", fake_train)
    result = ablate.study.tune.tune(
        _stub_study(), n_trials=3, startup_trials=2, results_dir=tmp_path
    )

    assert [t["state"] for t in result.trials] == ["COMPLETE", "COMPLETE", "PRUNED"]
    assert len(reached) == 10 + 10 + 1  # pruned at its first eval
    assert result.best_value == 0.8
    runs = open_store(f"sqlite:///{tmp_path / 'mlflow.db'}").runs("stub-tune").runs
    assert list(runs["status"]) == ["FINISHED", "FINISHED", "KILLED"]  # oldest first
    assert runs["outcome"].iloc[-1] == "pruned"


def test_sampled_values_reach_algorithm_and_optim():
    study = _stub_study(
        lr=SearchSpace(low=1e-5, high=1e-4, log=True, target="optim"),
        minibatches=SearchSpace(low=1, high=4),
        clip_high=SearchSpace(choices=[0.2, 0.28]),
    )
    trial = optuna.trial.FixedTrial({"lr": 2e-5, "minibatches": 2, "clip_high": 0.28})
    values = ablate.study.tune.sample(trial, study.search)
    base = ablate.study.tune.base_trial(study)
    spec = ablate.study.tune.apply(base.spec, study.search, values, "stub-tune")

    assert values == {"lr": 2e-5, "minibatches": 2, "clip_high": 0.28}
    assert isinstance(values["minibatches"], int)  # int bounds -> an int dimension
    assert (spec.optim.lr, spec.algorithm.minibatches, spec.algorithm.clip_high) == (2e-5, 2, 0.28)
    assert spec.study == "stub-tune" and spec.id != base.spec.id
    assert spec.algorithm.diff(base.spec.algorithm).keys() == {"minibatches", "clip_high"}


def test_tune_without_search_space_is_a_one_line_error(tmp_path):
    study = Study(name="nospace", base_models=["hopeless"], arms=[arm("grpo", "grpo")], passk=None)
    with pytest.raises(StudyError, match="declares no search space"):
        ablate.study.tune.tune(study, n_trials=1, results_dir=tmp_path)
