"""Fault injection, fast set: a real SIGKILL between a metrics flush and a checkpoint, a kill
followed by a corrupted checkpoint, the results store failing mid-trial, and a trial leased by
another runner. Each checks the exactly-once ledger: every trial FINISHED once, every (metric,
step) once, no step missing. The full kill matrix, concurrent processes, PostgreSQL workers and
an MLflow server restart are in test_faults_e2e.py (slow)."""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ablate import tracking
from ablate.checkpoint import WEIGHTS, CheckpointWarning, checkpoint_dirs
from ablate.errors import StoreError
from ablate.lease import LeaseStore
from ablate.runner import RunHooks, identified_trials, run_study
from ablate.study import load_study
from ablate.testing import exactly_once_problems, study_ledger, zoo_model_built

pytestmark = pytest.mark.skipif(not zoo_model_built("hopeless"), reason="zoo not available")

STEPS = 6
STUDY = f"""
from ablate.study import Budget, EvalSpec, Study, arm

STUDY = Study(
    name="faults",
    base_models=["hopeless"],
    arms=[arm("grpo", "grpo", kl_coef=0.0)],
    seeds=[0],
    budget=Budget(max_steps={STEPS}, prompts_per_step=2, group_size=2, max_new_tokens=12),
    eval=EvalSpec(every=3, max_problems=2, n_samples=2, ks=(1,)),
    passk=None,
    checkpoint_every=2,
)
"""


class Killed(BaseException):
    """Stands in for SIGKILL in-process: nothing catches it, nothing is flushed or closed."""


@pytest.fixture(scope="module")
def study_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("study") / "faults.py"
    path.write_text(textwrap.dedent(STUDY))
    return path


@pytest.fixture(scope="module")
def shared_uri(tmp_path_factory) -> str:
    """One MLflow database for the module (migrating a fresh one costs seconds); each test
    runs the study under its own name in it."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"
    tracking.open_store(uri).init()
    return uri


@pytest.fixture
def study(study_path, request):
    """The study under a name of this test's own (the subprocess test keeps the file's)."""
    name = request.node.name.removeprefix("test_")[:40]
    return dataclasses.replace(load_study(study_path), name=name)


@pytest.fixture(scope="module")
def reference(study_path, shared_uri, tmp_path_factory) -> list[tuple[int, float]]:
    """reward/mean of the trial run once, never killed (the study name does not enter any
    random stream, so every test's curve must equal this one)."""
    study = dataclasses.replace(load_study(study_path), name="reference")
    run_study(study, results_dir=tmp_path_factory.mktemp("reference"), tracking_uri=shared_uri)
    return reward_curve(shared_uri, study)


def reward_curve(uri: str, study) -> list[tuple[int, float]]:
    store = tracking.open_store(uri)
    (run_id,) = store.runs(study.name).runs["run_id"]
    return store.metric_history(run_id, "reward/mean")


def assert_exactly_once(study, uri: str) -> None:
    ledger = study_ledger(uri, study.name)
    ids = [t.id for t in identified_trials(study)]
    assert exactly_once_problems(ledger, ids, range(1, STEPS + 1), "reward/mean") == []
    evals = exactly_once_problems(ledger, ids, [0, 3, 6], "eval/pass_at_1")
    assert evals == []


def kill_at(step: int):
    def on_step(done: int, total: int, metrics) -> None:
        if done == step:
            raise Killed

    return RunHooks(on_step=on_step)


def test_sigkill_between_metrics_flush_and_checkpoint_then_rerun(
    study_path, shared_uri, reference, tmp_path
):
    study = load_study(study_path)  # the file's own name: the subprocess loads the file
    results = tmp_path / "results"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ABLATE_FAULT": "metrics_flushed@4"}
    cmd = [sys.executable, "-m", "ablate.cli", "run", str(study_path), "--results", str(results)]
    killed = subprocess.run(
        [*cmd, "--tracking-uri", shared_uri], env=env, capture_output=True, timeout=300
    )
    assert killed.returncode == -9, killed.stderr.decode()[-2000:]
    steps = [s for s, _ in reward_curve(shared_uri, study)]
    assert steps == [1, 2, 3, 4]  # flushed before the step-4 checkpoint that never came
    assert [p.name for p in checkpoint_dirs(trial_dir(results, study))] == ["step-000002"]
    run_study(study, results_dir=results, tracking_uri=shared_uri)  # from step 2: 3-4 again
    assert_exactly_once(study, shared_uri)
    assert reward_curve(shared_uri, study) == reference  # bit-identical resume


def test_kill_then_corrupt_latest_checkpoint_falls_back_to_the_previous(
    study, shared_uri, reference, tmp_path
):
    results = tmp_path / "results"
    with pytest.raises(Killed):
        run_study(study, results_dir=results, tracking_uri=shared_uri, hooks=kill_at(5))
    latest = checkpoint_dirs(trial_dir(results, study))[0]
    assert latest.name == "step-000004"
    (latest / WEIGHTS).write_bytes((latest / WEIGHTS).read_bytes()[:100])  # truncated
    with pytest.warns(CheckpointWarning, match=f"{latest / WEIGHTS}.*previous"):
        outcomes = run_study(study, results_dir=results, tracking_uri=shared_uri)
    assert [o.outcome for o in outcomes] == ["finished"]
    assert_exactly_once(study, shared_uri)
    assert reward_curve(shared_uri, study) == reference


def test_store_failure_mid_trial_is_one_error_and_a_rerun_recovers(
    study, shared_uri, reference, tmp_path, monkeypatch
):
    from ablate.tracking.mlflow_tracker import MLflowTracker

    results = tmp_path / "results"
    send = MLflowTracker._send

    def read_only_from_step_3(self, rows):
        if any(step >= 3 for *_, step in rows):
            raise sqlite3.OperationalError("attempt to write a readonly database")
        send(self, rows)

    monkeypatch.setattr(MLflowTracker, "_send", read_only_from_step_3)
    with pytest.raises(StoreError, match=r"readonly database.*resume from their last checkpoint"):
        run_study(study, results_dir=results, tracking_uri=shared_uri)
    runs = tracking.open_store(shared_uri).runs(study.name).runs
    assert list(runs["status"]) == ["RUNNING"]  # not marked FAILED: it was not the trial's fault
    monkeypatch.setattr(MLflowTracker, "_send", send)  # the disk is writable again
    run_study(study, results_dir=results, tracking_uri=shared_uri)
    assert_exactly_once(study, shared_uri)
    assert reward_curve(shared_uri, study) == reference


def test_a_trial_leased_by_a_live_runner_is_skipped_untouched(study, shared_uri, tmp_path):
    results = tmp_path / "results"
    (trial,) = identified_trials(study)
    store = tracking.open_store(shared_uri)
    leases = LeaseStore(store.lease_url(results))
    assert leases.acquire(f"{study.name}/{trial.id}", "other-machine:1:abcd") is None
    (outcome,) = run_study(study, results_dir=results, tracking_uri=shared_uri)
    assert outcome.outcome == "skipped" and "other-machine:1:abcd" in outcome.message
    assert store.runs(study.name).empty  # no run created for it
    assert not trial_dir(results, study).exists()
    assert parent_status(shared_uri, study.name) == "RUNNING"  # its runner closes the study


def parent_status(uri: str, study_name: str) -> str:
    from mlflow.tracking import MlflowClient

    run_id = tracking.open_store(uri).find_study(study_name).run_id
    return MlflowClient(uri).get_run(run_id).info.status


def trial_dir(results: Path, study) -> Path:
    (trial,) = identified_trials(study)
    return results / study.name / "trials" / trial.id
