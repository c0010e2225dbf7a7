"""The MLflow adapter against a real sqlite store: one database for the whole module (a fresh one
costs ~2.5 s of migrations); each test opens its own study in it, so tests stay independent."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from ablate.base.store.common import FLUSH_EVERY_STEPS, PARAM_MAX_CHARS, TAG_MAX_CHARS
from ablate.base.store.port import StoreFailures
from ablate.factors.algorithms import Algorithm
from ablate.tracking import (
    MemoryTracker,
    NullTracker,
    StudyStore,
    Tracker,
    algorithm_diff_tags,
    default_uri,
    environment_tags,
    is_failure,
    leases_of,
    open_store,
)
from ablate.tracking.files import FileStore
from ablate.tracking.mlflow import MLflowDatabaseStore, MLflowStore, MLflowStudy
from ablate.tracking.mlflow_tracker import MLflowTracker

# MLflow's own SQLAlchemy models trigger this deprecation; nothing of ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy:DeprecationWarning")


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("results")


@pytest.fixture(scope="module")
def uri(results) -> str:
    uri = default_uri(results)
    open_store(uri).init()
    open_store(uri).init()  # idempotent
    return uri


@pytest.fixture(scope="module")
def store(uri) -> MLflowStore:
    return open_store(uri)


def metric_history(uri: str, run_id: str, key: str) -> list[tuple[int, float]]:
    return open_store(uri).metric_history(run_id, key)


@pytest.fixture(scope="module")
def client(uri):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def trial(study: MLflowStudy, trial_id: str) -> MLflowTracker:
    return study.trial_tracker(trial_id, run_name=f"run-{trial_id}", tags={"seed": "0"})


def download(client, run_id: str, path: str, dst: Path) -> Path:
    return Path(client.download_artifacts(run_id, path, str(dst)))


def test_import_does_not_import_mlflow():
    code = (
        "import sys, ablate.tracking as t; t.open_store('sqlite:////tmp/x.db'); "
        "print('mlflow' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_default_uri_is_absolute_sqlite_in_results_dir_and_creates_nothing(tmp_path):
    uri = default_uri(tmp_path / "new" / "results")
    assert uri == f"sqlite:///{(tmp_path / 'new' / 'results').resolve()}/mlflow.db"
    assert uri.startswith("sqlite:////")
    assert not (tmp_path / "new").exists()  # the store's `init` creates it


def test_the_uri_chooses_the_adapter(tmp_path):
    assert isinstance(open_store(default_uri(tmp_path)), MLflowStore)
    assert isinstance(open_store("postgresql://u@h/db"), MLflowDatabaseStore)
    assert isinstance(open_store("postgresql+psycopg2://u@h/db"), MLflowDatabaseStore)
    server = open_store("https://mlflow.example")
    assert isinstance(server, MLflowStore) and not isinstance(server, MLflowDatabaseStore)
    assert isinstance(open_store(f"jsonl://{tmp_path}/store"), FileStore)
    for store in (open_store(default_uri(tmp_path)), open_store(f"jsonl://{tmp_path}/s")):
        assert isinstance(store, StudyStore)
    assert list(tmp_path.iterdir()) == []  # opening touches nothing


def test_parent_run_with_two_nested_trial_runs(uri, client, results):
    study = MLflowStudy.open(uri, "two-trials")
    runs = {t: trial(study, t) for t in ("a", "b")}
    for tracker in runs.values():
        run = client.get_run(tracker.run_id)
        assert run.data.tags["mlflow.parentRunId"] == study.run_id
        assert run.data.tags["ablate.study"] == "two-trials"
        assert run.data.tags["seed"] == "0"
    assert {client.get_run(r.run_id).data.tags["ablate.trial_id"] for r in runs.values()} == {
        "a",
        "b",
    }
    assert client.get_run(study.run_id).data.tags["ablate.kind"] == "study"
    # Reopening the study reuses its parent run; artifacts live next to the database.
    assert MLflowStudy.open(uri, "two-trials").run_id == study.run_id
    location = client.get_experiment(study.experiment_id).artifact_location
    assert location.startswith((results / "artifacts").resolve().as_uri())


def test_algorithm_fields_logged_as_params_and_tags(uri, client):
    tracker = trial(MLflowStudy.open(uri, "params"), "p")
    algo = Algorithm()
    tracker.log_params({f"algo.{k}": v for k, v in algo.as_dict().items()} | {"seed": 3})
    data = client.get_run(tracker.run_id).data
    for name, value in algo.as_dict().items():
        assert data.params[f"algo.{name}"] == str(value)
        assert data.tags[f"ablate.algo.{name}"] == str(value)
    assert data.params["seed"] == "3"
    assert "seed" in data.tags  # from trial_tracker's tags, not from the params
    assert data.tags["seed"] == "0"


def test_param_truncation_and_relogging(uri, client):
    tracker = trial(MLflowStudy.open(uri, "truncation"), "t")
    params = {"long": "x" * (PARAM_MAX_CHARS + 500), "pair": (1, 2), "nested": {"a": [1]}}
    tracker.log_params(params)
    tracker.log_params(params)  # a resumed trial logs the same params again
    tracker.set_tags({"note": "y" * (TAG_MAX_CHARS + 10)})
    data = client.get_run(tracker.run_id).data
    assert data.params["long"] == "x" * PARAM_MAX_CHARS
    assert json.loads(data.params["pair"]) == [1, 2]
    assert json.loads(data.params["nested"]) == {"a": [1]}
    assert len(data.tags["note"]) == TAG_MAX_CHARS
    from mlflow.exceptions import MlflowException

    with pytest.raises(MlflowException):  # a changed param is a bug, not something to hide
        tracker.log_params({"pair": (1, 3)})


def test_metrics_batched_in_order_and_nan_skipped(uri):
    tracker = trial(MLflowStudy.open(uri, "metrics"), "m")
    steps = FLUSH_EVERY_STEPS * 2 + 5
    for step in range(steps):
        loss = math.nan if step == 7 else step / 10
        tracker.log_metrics({"policy/loss": loss, "reward/mean": step * 2.0}, step)
    # Two batches sent (in the background: wait for the second); the tail is still buffered.
    tracker._sender.wait()
    assert len(metric_history(uri, tracker.run_id, "reward/mean")) == FLUSH_EVERY_STEPS * 2
    tracker.close()
    assert metric_history(uri, tracker.run_id, "reward/mean") == [
        (s, s * 2.0) for s in range(steps)
    ]
    loss = metric_history(uri, tracker.run_id, "policy/loss")
    assert [s for s, _ in loss] == [s for s in range(steps) if s != 7]
    assert all(not math.isnan(v) for _, v in loss)


def test_samples_are_parquet_artifacts(uri, client, tmp_path):
    tracker = trial(MLflowStudy.open(uri, "samples"), "s")
    records = [
        {"prompt": "1+2=", "completion": "3", "reward": 1.0, "truncated": False},
        {"prompt": "4+4=", "completion": "9", "reward": 0.0, "truncated": True},
    ]
    tracker.log_samples("eval", records, 12)
    tracker.log_samples("mixed", [{"x": 1}, {"x": "a"}], 13)  # mixed types are stored as text
    names = [a.path for a in client.list_artifacts(tracker.run_id, "samples")]
    assert names == ["samples/eval_step000012.parquet", "samples/mixed_step000013.parquet"]
    frame = pd.read_parquet(download(client, tracker.run_id, names[0], tmp_path))
    pd.testing.assert_frame_equal(frame, pd.DataFrame(records))
    mixed = pd.read_parquet(download(client, tracker.run_id, names[1], tmp_path))
    assert list(mixed["x"]) == ["1", "a"]


def test_config_json_artifact(uri, client, tmp_path):
    tracker = trial(MLflowStudy.open(uri, "config"), "c")
    tracker.log_dict(
        {"algorithm": {"clip": 0.2}, "shape": (2, 3), "path": Path("/x")}, "config.json"
    )
    tracker.log_dict({"k": 1}, "extra/more.json")
    data = json.loads(download(client, tracker.run_id, "config.json", tmp_path).read_text())
    assert data == {"algorithm": {"clip": 0.2}, "shape": [2, 3], "path": "/x"}
    assert json.loads(download(client, tracker.run_id, "extra/more.json", tmp_path).read_text())


def test_resume_reuses_run_and_finished_trial_is_refused(uri, client, store):
    study = MLflowStudy.open(uri, "resume")
    first = trial(study, "r")
    first.log_metrics({"reward/mean": 0.5}, 0)
    first.close("KILLED")  # e.g. the worker was preempted
    assert study.trial_status() == {"r": "KILLED"}
    second = trial(study, "r")
    assert second.run_id == first.run_id
    assert study.trial_status() == {"r": "RUNNING"}
    assert client.get_run(second.run_id).data.tags["ablate.resumes"] == "1"
    second.close()
    assert study.trial_status() == {"r": "FINISHED"}
    with pytest.raises(ValueError, match="FINISHED"):
        trial(study, "r")
    assert len(store.runs("resume")) == 1
    assert store.runs("resume").runs["resumes"].tolist() == [1]


def test_a_resumed_run_logs_each_metric_step_exactly_once(uri, client):
    """A trial resumed from a checkpoint at step 1 recomputes steps 2-3 that the killed process
    had already sent: the resumed tracker knows which (metric, step) the run holds and skips
    them, within a process too."""
    study = MLflowStudy.open(uri, "repeat")
    first = trial(study, "r")
    for step in range(4):
        first.log_metrics({"reward/mean": float(step), "loss": -float(step)}, step)
    first.flush()  # then killed: the run stays RUNNING
    resumed = trial(study, "r")
    assert resumed.run_id == first.run_id
    for step in range(2, 6):  # steps 2-3 again (recomputed), then new ones
        resumed.log_metrics({"reward/mean": 10.0 + step, "loss": -float(step), "new": 1.0}, step)
    resumed.log_metrics({"reward/mean": 99.0}, 5)  # the same step twice in one process
    resumed.close()
    rows = client.get_metric_history(resumed.run_id, "reward/mean")
    assert sorted(m.step for m in rows) == [0, 1, 2, 3, 4, 5]  # no step twice, none missing
    assert metric_history(uri, resumed.run_id, "reward/mean") == [
        (0, 0.0),
        (1, 1.0),
        (2, 2.0),
        (3, 3.0),
        (4, 14.0),
        (5, 15.0),
    ]
    assert sorted(m.step for m in client.get_metric_history(resumed.run_id, "new")) == [2, 3, 4, 5]


def test_guard_stops_writes_of_a_tracker_that_lost_its_lease(uri, client):
    lost = []

    def guard() -> None:
        if lost:
            raise RuntimeError("lease lost")

    tracker = MLflowStudy.open(uri, "guarded").trial_tracker(
        "g", run_name="g", tags={}, guard=guard
    )
    tracker.log_metrics({"x": 1.0}, 0)
    tracker.flush()
    lost.append(True)
    tracker.log_metrics({"x": 2.0}, 1)
    with pytest.raises(RuntimeError, match="lease lost"):
        tracker.flush()
    assert [m.step for m in client.get_metric_history(tracker.run_id, "x")] == [0]


def test_trial_status_and_the_run_table(uri, client, store):
    study = MLflowStudy.open(uri, "status", experiment="status-experiment")
    done, failed, running = trial(study, "done"), trial(study, "failed"), trial(study, "running")
    done.log_metrics({"eval/accuracy": 0.75}, 5)
    done.log_params({"algo.clip_high": 0.28})
    done.close()
    failed.close("FAILED")
    assert study.trial_status() == {"done": "FINISHED", "failed": "FAILED", "running": "RUNNING"}
    # Another study in the same database does not leak in.
    assert MLflowStudy.open(uri, "status-other").trial_status() == {}
    table = store.runs("status")
    assert len(table) == 3
    assert set(table.runs["run_id"]) == {done.run_id, failed.run_id, running.run_id}
    position = table.runs["trial_id"].tolist().index("done")
    assert table.runs["status"].iloc[position] == "FINISHED"
    assert table.metric("eval/accuracy").iloc[position] == 0.75
    assert table.metrics_of(done.run_id) == {"eval/accuracy": 0.75}
    assert table.params["algo.clip_high"].iloc[position] == "0.28"
    assert client.get_run(done.run_id).data.tags["mlflow.parentRunId"] == study.run_id
    assert store.runs("no-such-study").empty
    assert running.run_id in set(store.runs("status").runs["run_id"])


def test_study_artifact_tags_and_close(uri, client, store, tmp_path):
    study = MLflowStudy.open(uri, "study-artifacts")
    table = tmp_path / "pass_at_g.csv"
    pd.DataFrame({"model": ["m"], "template": ["plain"], "pass@8": [0.5]}).to_csv(table)
    study.attach(table)
    study.set_tags({"reference": "grpo"})
    study.close()
    run = client.get_run(study.run_id)
    assert [a.path for a in client.list_artifacts(study.run_id)] == ["pass_at_g.csv"]
    assert run.data.tags["reference"] == "grpo"
    assert run.info.status == "FINISHED"
    assert store.find_study("study-artifacts").run_id == study.run_id  # found, status kept
    assert client.get_run(study.run_id).info.status == "FINISHED"
    assert store.find_study("no-such-study") is None
    assert client.get_run(MLflowStudy.open(uri, "study-artifacts").run_id).info.status == "RUNNING"


def test_attach_keeps_a_folder_layout_and_the_run_status(uri, client, store, tmp_path):
    study = store.open_study("attach")  # RUNNING: a trial may still be trained elsewhere
    (tmp_path / "report" / "tables").mkdir(parents=True)
    (tmp_path / "report" / "report.md").write_text("# r")
    (tmp_path / "report" / "tables" / "main.csv").write_text("a\n1\n")
    store.find_study("attach").attach(tmp_path / "report", "report")
    assert store.list_artifacts(study.run_id, "report") == ["report/report.md", "report/tables"]
    assert store.list_artifacts(study.run_id, "report/tables") == ["report/tables/main.csv"]
    assert client.get_run(study.run_id).info.status == "RUNNING"


def test_bad_status_and_quotes_are_rejected(uri):
    study = MLflowStudy.open(uri, "bad")
    with pytest.raises(ValueError, match="FINISHED"):
        trial(study, "x").close("DONE")
    with pytest.raises(ValueError, match="quotes"):
        MLflowStudy.open(uri, "it's")


def test_tracker_context_manager_marks_failure(uri):
    study = MLflowStudy.open(uri, "context")
    with pytest.raises(RuntimeError), trial(study, "boom"):
        raise RuntimeError("diverged")
    assert study.trial_status() == {"boom": "FAILED"}


def test_algorithm_diff_tags():
    algo = Algorithm(clip_high=0.28, loss_agg="token_mean")
    assert algorithm_diff_tags(algo, Algorithm()) == {
        "ablate.diff.clip_high": "0.28",
        "ablate.diff.loss_agg": "token_mean",
        "ablate.diff": "clip_high=0.28, loss_agg=token_mean",
    }
    assert algorithm_diff_tags(Algorithm(), Algorithm()) == {"ablate.diff": "none"}


def test_environment_tags():
    import mlflow

    tags = environment_tags()
    assert re.fullmatch(r"[0-9a-f]{40}|unknown", tags["ablate.git.commit"])
    assert tags["ablate.git.dirty"] in {"true", "false", "unknown"}
    assert tags["ablate.version.mlflow"] == mlflow.__version__
    assert tags["ablate.version.python"] == ".".join(map(str, sys.version_info[:3]))
    assert {
        "ablate.version.ablate",
        "ablate.version.torch",
        "ablate.version.transformers",
    } <= tags.keys()


def test_every_tracker_satisfies_the_protocol():
    memory = MemoryTracker()
    memory.log_dict({"a": 1}, "config.json")
    memory.close("FAILED")
    assert memory.dicts == {"config.json": {"a": 1}}
    assert memory.status == "FAILED"
    NullTracker().close()
    for cls in (NullTracker, MemoryTracker, MLflowTracker):
        assert issubclass(cls, Tracker)


def test_store_failures_are_the_store_s_to_classify(store, tmp_path):
    import errno
    import sqlite3

    assert is_failure(store, sqlite3.OperationalError("attempt to write a readonly database"))
    assert is_failure(store, OSError(errno.ENOSPC, "No space left on device"))
    assert not is_failure(store, RuntimeError("a bug in a trial"))
    files = open_store(f"jsonl://{tmp_path}/store")
    assert not isinstance(files, StoreFailures)  # a store of files fails only as the disk does
    assert is_failure(files, OSError(errno.EROFS, "Read-only file system"))
    assert not is_failure(files, sqlite3.OperationalError("database is locked"))
    assert not is_failure(files, ValueError("a bug in a trial"))
    leases = leases_of(files, tmp_path)  # its leases are a database: they classify their own
    assert leases.is_failure(sqlite3.OperationalError("database is locked"))
    assert not leases.is_failure(ValueError("a bug in a trial"))


def test_background_runs_one_call_at_a_time_and_hands_errors_back():
    import threading

    from ablate.base.store.common import Background

    release, order = threading.Event(), []
    sender = Background()

    def slow(tag):
        release.wait(5)
        order.append(tag)

    sender.submit(slow, "first")
    assert order == []  # submit returned while the call is still running
    release.set()
    sender.submit(slow, "second")  # waits for the first before starting
    sender.wait()
    assert order == ["first", "second"]

    def broken():
        raise OSError("disk full")

    sender.submit(broken)
    with pytest.raises(OSError, match="disk full"):
        sender.wait()
    sender.wait()  # the error is raised once
