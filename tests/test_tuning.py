"""Tuned arms at an equal budget (`Study(tune=TuneSpec(...))`): one-line errors before compute,
every arm gets exactly the declared tuning budget, tuning never reads the eval split, a rerun
trains no tuning trial again, and the study's trials train at each arm's chosen setting."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

import ablate.study.runner
from ablate import Budget, ConfigError, EvalSpec, Study, StudyError, TuneSpec, arm, log_range
from ablate.commands.run import check_tunes
from ablate.study.identity import identified_trials
from ablate.study.tune_phase import chosen_settings
from ablate.tasks.arithmetic import ArithmeticTask
from ablate.testing import zoo_model_built
from ablate.tracking import open_store

pytestmark = [
    pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:each eval reads 3 problems"),
]

LR = {"lr": log_range(1e-6, 1e-4)}


def _study(**tune) -> Study:
    spec = dict(params=LR, trials=3, steps=1, seeds=(5, 6), selection_problems=3) | tune
    return Study(
        name="fair",
        base_models=["hopeless"],
        arms=[arm("grpo", "grpo", kl_coef=0.0), arm("dr_grpo", "dr_grpo", kl_coef=0.0)],
        seeds=[0],
        budget=Budget(max_steps=1, prompts_per_step=2, group_size=2, max_new_tokens=8),
        eval=EvalSpec(at_start=False, max_problems=3, n_samples=2, ks=(1,)),
        passk=None,
        tune=TuneSpec(**spec),
    )


@pytest.mark.parametrize(
    ("tune", "message"),
    [
        ({"params": {"lrr": log_range(1e-6, 1e-4)}}, "unknown param 'lrr'"),
        ({"params": {"lr": log_range(1e-4, 1e-6)}}, r"'lr' has an empty range"),
        ({"params": {}}, "params is empty"),
        ({"selection": "eval"}, "selection='eval' is the eval split"),
        ({"trials": 0}, "trials=0 must be >= 1"),
    ],
)
def test_a_bad_tuning_declaration_is_one_line_before_compute(tune, message):
    with pytest.raises(StudyError, match=message) as caught:
        _study(**tune)
    assert "\n" not in str(caught.value)


def test_each_arm_gets_the_declared_budget_on_the_selection_split_exactly_once(
    tmp_path, monkeypatch
):
    if not zoo_model_built("hopeless"):
        pytest.skip("zoo model 'hopeless' not built (ablate zoo build ladder)")
    read: list[tuple[str, str]] = []  # (phase, split) of every read of the task's problems
    phase = ["trials"]
    problems = ArithmeticTask.problems
    monkeypatch.setattr(
        ArithmeticTask,
        "problems",
        lambda self, split: read.append((phase[0], split)) or problems(self, split),
    )
    tune_arms = ablate.study.runner.tune_arms

    def tuning(*args, **kwargs):
        phase[0] = "tuning"
        try:
            return tune_arms(*args, **kwargs)
        finally:
            phase[0] = "trials"

    monkeypatch.setattr(ablate.study.runner, "tune_arms", tuning)
    study, results = _study(), tmp_path / "results"

    outcomes = ablate.study.runner.run_study(study, results_dir=results)

    store = open_store(f"sqlite:///{results / 'mlflow.db'}")
    tuning_runs = store.runs("fair-tune")
    runs = tuning_runs.runs
    # every arm: 3 settings × 2 seeds, each trained to its 1 step, all finished, none pruned
    assert runs.groupby("arm").size().to_dict() == {"grpo": 6, "dr_grpo": 6}
    assert set(runs["status"]) == {"FINISHED"} and runs["trial_id"].nunique() == 12
    assert sorted(runs["seed"].unique()) == [5, 6]
    steps = {
        int(max(s for s, _ in store.metric_history(r, "budget/generated_tokens")))
        for r in runs["run_id"]
    }
    assert steps == {1}
    # tuning read the train split only (its selection split is held out of it); the trials
    # read the eval split
    assert {s for p, s in read if p == "tuning"} == {"train"}
    assert ("trials", "eval") in read
    table = pd.read_csv(results / "fair" / "tuning.csv")
    assert table.groupby("arm").size().to_dict() == {"grpo": 3, "dr_grpo": 3}
    assert table.groupby("arm")["chosen"].sum().to_dict() == {"grpo": 1, "dr_grpo": 1}
    assert table["lr"].between(1e-6, 1e-4).all()
    chosen = table[table["chosen"]].set_index("arm")["lr"]
    final = store.runs("fair")
    lrs = final.params.set_index(final.runs["arm"])["optim.lr"].astype(float)
    for a in ("grpo", "dr_grpo"):
        assert lrs[a] == pytest.approx(chosen[a], rel=1e-9)
    assert [o.outcome for o in outcomes] == ["finished", "finished"]
    # a Slurm task, `ablate worker` and `ablate status` find the trials the runner trained:
    # the chosen values read back from tuning.csv give the same trial ids
    reread = identified_trials(study, chosen=chosen_settings(study, results))
    assert {t.id for t in reread} == set(final.runs["trial_id"])
    assert {t.id for t in identified_trials(study)}.isdisjoint(final.runs["trial_id"])

    again = ablate.study.runner.run_study(study, results_dir=results)  # a rerun: a replay

    assert len(store.runs("fair-tune").runs) == 12  # no tuning trial trained twice
    assert pd.read_csv(results / "fair" / "tuning.csv").equals(table)
    assert [o.outcome for o in again] == ["skipped", "skipped"]


def test_what_runs_trials_without_tuning_them_asks_for_the_tuning_first(tmp_path):
    study = _study()
    with pytest.raises(
        StudyError, match=r"no .*tuning.csv yet: tune it first: `ablate run .*--tune-only"
    ):
        chosen_settings(study, tmp_path)
    (tmp_path / "fair").mkdir()
    (tmp_path / "fair" / "tuning.csv").write_text(
        "arm,number,score,state,chosen,lr\ngrpo,0,0.5,finished,True,3e-05\n"
    )
    with pytest.raises(StudyError, match="no chosen setting for dr_grpo"):
        chosen_settings(study, tmp_path)
    untuned = dataclasses.replace(study, tune=None)
    assert chosen_settings(untuned, tmp_path) == {}


def test_tune_only_needs_a_tuned_study_and_no_sequential_design():
    with pytest.raises(ConfigError, match="declares no tune="):
        check_tunes(dataclasses.replace(_study(), tune=None), True, until_decided=False)
    with pytest.raises(ConfigError, match="leave out --until-decided"):
        check_tunes(_study(), True, until_decided=True)


def _report_data(tune: TuneSpec | None, tuning: pd.DataFrame):
    from ablate.baselines import baseline
    from ablate.testing.studies import study_data

    algos = {"grpo": baseline("grpo"), "dr_grpo": baseline("dr_grpo")}
    runs = [
        (a, "m", s, {"eval/pass_at_1": [0.2, 0.3 + 0.1 * (a == "dr_grpo") + 0.01 * s]})
        for a in algos
        for s in range(3)
    ]
    return study_data(
        runs, algorithms=algos, reference="grpo", tune=tune, tuning=tuning, shared={"lr": 3e-5}
    )


def test_the_report_states_each_arms_tuning_budget_and_chosen_value():
    from ablate.report.render import configuration, paper

    tuning = pd.DataFrame(
        [
            {"arm": a, "number": n, "score": 0.1 * n, "state": "finished", "chosen": n == best}
            | {"lr": lr}
            for a, best in (("grpo", 1), ("dr_grpo", 0))
            for n, lr in enumerate((2e-6, 4e-5))
        ]
    )
    tune = TuneSpec(params=LR, trials=2, steps=5, seeds=(0, 1))
    data = _report_data(tune, tuning)

    rows = {r["arm"]: r for r in configuration.config_table(data).rows}

    assert (rows["grpo"]["tuning"], rows["grpo"]["setting"]) == ("2 × 2 runs", "lr=4e-05")
    assert (rows["dr_grpo"]["tuning"], rows["dr_grpo"]["setting"]) == ("2 × 2 runs", "lr=2e-06")
    caption = paper.headline_table(data).caption
    assert "Setting: tuned per arm, 2 trials each (lr; 2 trials × 2 seeds × 5 steps" in caption

    untuned = _report_data(None, pd.DataFrame())
    rows = {r["arm"]: r for r in configuration.config_table(untuned).rows}
    assert rows["dr_grpo"]["tuning"] == "none (shared)" and rows["dr_grpo"]["setting"] == "lr=3e-05"
    assert "Setting: shared setting (lr=3e-05)." in paper.headline_table(untuned).caption


def test_plan_counts_the_tuning_phase_in_every_designs_hours():
    from dataclasses import replace

    from ablate.report.stats.plan import default_cost, tuning_line, tuning_seconds

    study = _study(trials=4, steps=10, seeds=(0, 1), selection_problems=8)
    cost = default_cost(study)
    step = cost.train_seconds / study.budget.max_steps
    per_run = 10 * step + 8 * study.eval.n_samples * cost.eval_sample_seconds
    assert tuning_seconds(study, cost) == pytest.approx(2 * 4 * 2 * per_run)  # arms×trials×seeds
    assert tuning_seconds(replace(study, tune=None), cost) == 0.0
    with_tuning = replace(cost, fixed_seconds=tuning_seconds(study, cost))
    extra = with_tuning.hours(3, 64, 2) - cost.hours(3, 64, 2)
    assert extra == pytest.approx(2 * 4 * 2 * per_run / 3600)
    assert tuning_line(study, with_tuning).startswith(
        "tuning: 2 arms × 4 trials × 2 seed(s) = 16 runs"
    )
