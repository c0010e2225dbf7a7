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
from ablate.base.errors import StoreError
from ablate.stages.checkpoint import WEIGHTS, CheckpointWarning, checkpoint_dirs
from ablate.study import load_study
from ablate.study.identity import identified_trials
from ablate.study.runner import RunHooks, run_study
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
    cmd = [
        sys.executable,
        "-m",
        "ablate.commands.cli",
        "run",
        str(study_path),
        "--results",
        str(results),
    ]
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
    leases = tracking.leases_of(store, results)
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


def _safetensors_disk_full(*args, **kwargs):
    from safetensors import SafetensorError

    raise SafetensorError(
        "Error while serializing: I/O error: No space left on device (os error 28)"
    )


def _torch_short_write(*args, **kwargs):
    raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 662")


def _no_space(*args, **kwargs):
    raise OSError(28, "No space left on device")


#: What each writer raises when the disk fills, injected where it writes a checkpoint.
DISK_FULL = {
    "safetensors": ("save_model", _safetensors_disk_full),
    "torch.save": ("torch.save", _torch_short_write),
    "os": ("save_model", _no_space),
}


@pytest.mark.parametrize("writer", list(DISK_FULL))
def test_disk_full_in_a_checkpoint_stops_the_study_and_a_rerun_recovers(
    writer, study, shared_uri, reference, tmp_path, monkeypatch
):
    import torch

    from ablate.stages import checkpoint

    study = dataclasses.replace(study, name=f"disk_full_{writer.replace('.', '_')}")
    results = tmp_path / "results"
    name, fail = DISK_FULL[writer]
    owner, attr = (torch, "save") if name == "torch.save" else (checkpoint, name)
    real = getattr(owner, attr)

    def full_from_step_4(obj, where, *args, **kwargs):
        if "step-000004" in str(where):
            fail()
        return real(obj, where, *args, **kwargs)

    monkeypatch.setattr(owner, attr, full_from_step_4)
    with pytest.raises(StoreError, match=r"results store cannot be written.*seed 0"):
        run_study(study, results_dir=results, tracking_uri=shared_uri)
    runs = tracking.open_store(shared_uri).runs(study.name).runs
    assert list(runs["status"]) == ["RUNNING"]  # the disk's fault, not the trial's: it resumes
    assert [p.name for p in (trial_dir(results, study) / "checkpoints").iterdir()] == [
        "step-000002"
    ]  # no half checkpoint left taking the space
    monkeypatch.setattr(owner, attr, real)  # space freed
    (outcome,) = run_study(study, results_dir=results, tracking_uri=shared_uri)
    assert outcome.outcome == "finished"
    assert_exactly_once(study, shared_uri)
    assert reward_curve(shared_uri, study) == reference


def test_ablate_run_with_a_full_disk_is_one_line_and_exit_2(
    study_path, tmp_path, monkeypatch, capsys
):
    from ablate.commands.cli import main
    from ablate.stages import checkpoint

    monkeypatch.setattr(checkpoint, "save_model", _safetensors_disk_full)
    results = tmp_path / "results"
    argv = ["run", str(study_path), "--results", str(results), "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if not line.startswith("warning: ")]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert errors[0].startswith("error: the results store cannot be written (")
    assert "/checkpoints/step-000002.tmp-" in errors[0]  # the file the disk refused, named
    assert ": SafetensorError: Error while serializing" in errors[0]
    assert "No space left on device" in errors[0]
    assert not (tmp_path / "out").exists()


def test_ablate_run_exits_1_naming_the_failed_trials(study_path, tmp_path, monkeypatch, capsys):
    from ablate import trial
    from ablate.commands.cli import main

    def broken(*args, **kwargs):
        raise ValueError("a bug in the trial")

    monkeypatch.setattr(trial, "train", broken)
    results = tmp_path / "results"
    argv = ["run", str(study_path), "--results", str(results), "--out", str(tmp_path / "out")]
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    (line,) = [x for x in captured.err.splitlines() if x.startswith("error:")]
    assert line.startswith("error: 1 of 1 trials failed (grpo | hopeless | plain | seed 0)")
    assert "ValueError: a bug in the trial" in captured.out  # the reason, in the summary
    runs = tracking.open_store(tracking.default_uri(results)).runs("faults").runs
    assert list(runs["status"]) == ["FAILED"]


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_sigterm_or_sigint_marks_the_run_killed_in_one_line_then_a_rerun_resumes(
    signame, study_path, reference, tmp_path
):
    import signal

    results = tmp_path / "results"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ABLATE_FAULT": f"step_logged@4:{signame}"}
    cmd = [
        sys.executable,
        "-m",
        "ablate.commands.cli",
        "run",
        str(study_path),
        "--results",
        str(results),
    ]
    stopped = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    signum = getattr(signal, signame)
    assert stopped.returncode == 128 + signum, stopped.stderr[-2000:]
    said = [x for x in stopped.stderr.splitlines() if not x.startswith("warning: ")]
    assert said == [f"interrupted by {signame}: a rerun resumes where it stopped"], said
    uri = tracking.default_uri(results)
    study = load_study(study_path)
    assert list(tracking.open_store(uri).runs(study.name).runs["status"]) == ["KILLED"]
    assert parent_status(uri, study.name) == "KILLED"
    (outcome,) = run_study(study, results_dir=results)  # resumes the same run
    assert outcome.outcome == "finished"
    assert list(tracking.open_store(uri).runs(study.name).runs["status"]) == ["FINISHED"]
    assert_exactly_once(study, uri)
    assert reward_curve(uri, study) == reference
