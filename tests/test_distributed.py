"""Distributed workers: the fast tests use a sqlite Optuna storage and a stub trainer (the claim,
skip, retry and enqueue logic); the end-to-end test starts a real PostgreSQL server holding both
the Optuna storage and the MLflow store, and two `ablate worker` processes share a study."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading

import pytest

from ablate.base.errors import ConfigError
from ablate.base.sql_urls import driver_url
from ablate.study import Budget, EvalSpec, Study, arm, load_study, trial_run
from ablate.study.distributed import (
    TRIAL_ATTR,
    Heartbeat,
    WorkerConfig,
    claim_waiting,
    prepare,
    run_worker,
)
from ablate.study.identity import identified_trials
from ablate.study.runner import TrialOutcome
from ablate.study.tune_phase import chosen_settings
from ablate.testing import zoo_model_built
from ablate.tracking import StudyRun, open_store

pytestmark = pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy:DeprecationWarning")

STUDY_FILE = """
from ablate.study import Budget, EvalSpec, Study, arm

STUDY = Study(
    name={name!r},
    base_models=["hopeless"],
    arms=[arm("grpo", "grpo"), arm("dr_grpo", "dr_grpo"), arm("gspo", "gspo")],
    seeds=[0, 1],
    budget=Budget(max_steps=2, prompts_per_step=2, group_size=2, max_new_tokens=16),
    eval=EvalSpec(at_start=False, max_problems=2, n_samples=2, ks=(1,)),
    passk=None,
    checkpoint_every=1,
)
"""


def six_trial_study(name: str) -> Study:
    return Study(
        name=name,
        base_models=["hopeless"],
        arms=[arm("grpo", "grpo"), arm("dr_grpo", "dr_grpo"), arm("gspo", "gspo")],
        seeds=[0, 1],
        budget=Budget(max_steps=2, prompts_per_step=2, group_size=2, max_new_tokens=16),
        eval=EvalSpec(at_start=False, max_problems=2, n_samples=2, ks=(1,)),
        passk=None,
    )


# --- fast: sqlite storage, stub trainer ------------------------------------------------------


@pytest.fixture(scope="module")
def mlflow_uri(tmp_path_factory) -> str:
    """One MLflow database for the module (a fresh one costs seconds of migrations); every test
    uses its own study name in it."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


@pytest.fixture
def config(tmp_path, mlflow_uri) -> WorkerConfig:
    return WorkerConfig(
        storage=f"sqlite:///{tmp_path / 'optuna.db'}",
        tracking_uri=mlflow_uri,
        results_dir=tmp_path / "results",
        heartbeat_interval=1,
        grace_period=60,
    )


@pytest.fixture
def ran(monkeypatch) -> list[str]:
    """Replace the trainer behind `run_trial`: finish the trial's run, record its id."""
    calls: list[str] = []
    parents: dict[tuple[str, str], StudyRun] = {}  # opening one costs ~0.6 s

    def fake_run_trial(study, trial, uri, study_dir, hooks, index, total):
        calls.append(trial.id)
        if (uri, study.name) not in parents:
            parents[uri, study.name] = open_store(uri).open_study(study.name)
        parent = parents[uri, study.name]
        tracker = parent.trial_tracker(trial.id, run_name="x", tags={})
        tracker.close("FINISHED")
        s = trial.spec
        return TrialOutcome(
            trial.id,
            trial.arm,
            s.model,
            s.template,
            s.seed,
            "finished",
            final_eval={"eval/pass_at_1": 0.25},
        )

    monkeypatch.setattr(trial_run, "run_trial", fake_run_trial)
    return calls


def optuna_trials(config: WorkerConfig, name: str):
    import optuna

    return optuna.load_study(study_name=name, storage=config.storage).get_trials()


def test_worker_runs_each_trial_once_skips_finished_and_invents_none(config, ran):
    study = six_trial_study("fast")
    ids = [t.id for t in identified_trials(study)]
    open_store(config.tracking_uri).open_study(study.name).trial_tracker(
        ids[0], run_name="done before", tags={}
    ).close("FINISHED")

    outcomes = run_worker(study, config)
    again = run_worker(study, config)  # a late worker: nothing left, and it adds nothing

    assert sorted(ran) == sorted(ids[1:])
    assert [o.outcome for o in outcomes].count("skipped") == 1
    assert again == []
    trials = optuna_trials(config, study.name)
    assert len(trials) == 6  # no trial invented by the sampler, none enqueued twice
    assert sorted(t.user_attrs[TRIAL_ATTR] for t in trials) == sorted(ids)
    states = sorted(t.state.name for t in trials)
    assert states == ["COMPLETE"] * 5 + ["PRUNED"]  # the skipped one is not a result
    assert {t.value for t in trials if t.state.name == "COMPLETE"} == {0.25}


def beat_long_ago(storage: str, trial_id: int, seconds: int) -> None:
    """Move a trial's last heartbeat `seconds` into the past, as if its worker had died then:
    the test states the silence instead of sleeping through the grace period."""
    import datetime

    import sqlalchemy as sa
    from optuna.storages._rdb import models

    table = models.TrialHeartbeatModel.__table__
    engine = sa.create_engine(storage)
    with engine.begin() as conn:
        (last,) = conn.execute(sa.select(table.c.heartbeat).where(table.c.trial_id == trial_id))
        earlier = last[0] - datetime.timedelta(seconds=seconds)
        conn.execute(table.update().where(table.c.trial_id == trial_id).values(heartbeat=earlier))
    engine.dispose()


def test_a_tuned_study_trains_at_the_chosen_settings_and_asks_for_its_tuning_first(config, ran):
    import dataclasses

    from ablate.base.errors import StudyError
    from ablate.study import TuneSpec, log_range

    tune = TuneSpec(params={"lr": log_range(1e-6, 1e-4)}, trials=1, steps=1, selection_problems=3)
    study = dataclasses.replace(six_trial_study("tuned"), tune=tune)
    with pytest.raises(StudyError, match="--tune-only"):
        run_worker(study, config)  # before the tuning phase: nothing enqueued, nothing trained
    assert ran == []
    folder = config.results_dir / "tuned"
    folder.mkdir(parents=True)
    rows = "".join(
        f"{a},0,0.5,finished,True,{lr}\n"
        for a, lr in (("grpo", 1e-5), ("dr_grpo", 2e-5), ("gspo", 4e-5))
    )
    (folder / "tuning.csv").write_text("arm,number,score,state,chosen,lr\n" + rows)

    run_worker(study, config)

    lrs = {t.arm: t.spec.optim.lr for t in identified_trials(study) if t.id in ran}
    assert lrs == {}  # no trial at the shared lr (3e-5) was trained
    tuned = {
        t.id: t.spec.optim.lr
        for t in identified_trials(study, chosen=chosen_settings(study, config.results_dir))
    }
    assert sorted(ran) == sorted(tuned)
    assert set(tuned.values()) == {1e-5, 2e-5, 4e-5}


def test_stale_trial_is_failed_and_retried_once(config, ran):
    study = six_trial_study("stale")
    queue = prepare(study, config)
    dead = claim_waiting(queue)  # a worker that claims a trial, beats once and dies
    with Heartbeat(queue, queue.storage_id(dead), interval=60):
        pass
    beat_long_ago(config.storage, queue.storage_id(dead), seconds=3600)

    run_worker(study, config)

    # the dead one ran once, here
    assert sorted(ran) == sorted(t.id for t in identified_trials(study))
    trials = optuna_trials(config, study.name)
    assert len(trials) == 7
    failed = [t for t in trials if t.state.name == "FAIL"]
    assert [t.number for t in failed] == [dead.number]
    retry = [t for t in trials if t.system_attrs.get("failed_trial") == dead.number]
    assert len(retry) == 1 and retry[0].state.name == "COMPLETE"
    assert retry[0].user_attrs[TRIAL_ATTR] == dead.user_attrs[TRIAL_ATTR]


def test_concurrent_setup_enqueues_each_trial_once_and_one_parent(config):
    study = six_trial_study("race")
    errors: list[BaseException] = []

    def setup() -> None:
        try:
            prepare(study, config)
        except BaseException as exc:  # re-raised in the test thread below
            errors.append(exc)

    threads = [threading.Thread(target=setup) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert not errors
    trials = optuna_trials(config, study.name)
    assert sorted(t.user_attrs[TRIAL_ATTR] for t in trials) == sorted(
        t.id for t in identified_trials(study)
    )
    assert len(_parent_runs(config.tracking_uri, study.name)) == 1


def test_storage_urls():
    assert driver_url("postgresql://u:p@h:5/db") == "postgresql+psycopg2://u:p@h:5/db"
    assert driver_url("sqlite:///x.db") == "sqlite:///x.db"
    config = WorkerConfig(storage="mysql://h/db", tracking_uri="sqlite:///m.db", results_dir="r")
    with pytest.raises(ConfigError, match="postgresql://"):
        prepare(six_trial_study("bad"), config)


def _parent_runs(uri: str, name: str) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=driver_url(uri))
    where = f"tags.`ablate.kind` = 'study' and tags.`ablate.study` = '{name}'"
    exps = [e.experiment_id for e in client.search_experiments()]
    return client.search_runs(exps, where)


# --- end to end: PostgreSQL, two worker processes, real (tiny) trials ------------------------


def test_two_workers_share_a_study_on_postgres(postgres, tmp_path):
    if not zoo_model_built("hopeless"):
        pytest.skip("zoo model 'hopeless' not built (ablate zoo build ladder)")
    study_file = tmp_path / "dist.py"
    study_file.write_text(STUDY_FILE.format(name="dist"))
    cmd = [
        sys.executable,
        "-m",
        "ablate.commands.cli",
        "worker",
        str(study_file),
        "--storage",
        postgres["optuna"],
        "--tracking-uri",
        postgres["mlflow"],
        "--threads",
        "1",
        "--heartbeat-interval",
        "5",
        "--grace-period",
        "60",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    workers = [
        subprocess.Popen(
            [*cmd, "--results", str(tmp_path / f"w{i}")],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]
    logs = [w.communicate(timeout=240)[0] for w in workers]

    assert [w.returncode for w in workers] == [0, 0], "\n".join(logs)
    counts = [int(re.search(r"worker ran (\d+) trial", log).group(1)) for log in logs]
    assert sum(counts) == 6, logs  # split between the workers as they come (not asserted)
    runs = open_store(driver_url(postgres["mlflow"])).runs("dist").runs
    expected = {t.id for t in identified_trials(load_study(study_file))}
    assert len(runs) == 6 and set(runs["trial_id"]) == expected  # no trial ran twice
    assert set(runs["status"]) == {"FINISHED"}
    parents = _parent_runs(postgres["mlflow"], "dist")
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    import optuna

    trials = optuna.load_study(study_name="dist", storage=driver_url(postgres["optuna"]))
    assert sorted(t.state.name for t in trials.get_trials()) == ["COMPLETE"] * 6
