"""Fault suite, fast set for the results store's own files: a kill while the MLflow database is
being built (it is built under another name and renamed into place), a database an older build
left half-made (rebuilt when empty; named with its repair when it holds runs), every disk error
(EFBIG from a real `ulimit -f`, EDQUOT, EROFS, ENOSPC) as one line that leaves the trial to resume,
and damaged files of the file store named by `status`, `report` and `run`. Each ends with the
exactly-once ledger after a rerun."""

from __future__ import annotations

import dataclasses
import errno
import os
import re
import resource
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ablate import tracking
from ablate.base.errors import StoreError
from ablate.commands.cli import main
from ablate.study import load_study
from ablate.study.identity import identified_trials
from ablate.study.runner import run_study
from ablate.testing import exactly_once_problems, study_ledger, zoo_model_built
from ablate.tracking import mlflow_schema

pytestmark = pytest.mark.skipif(not zoo_model_built("hopeless"), reason="zoo not available")

STEPS = 4
STUDY = f"""
from ablate.study import Budget, EvalSpec, Study, arm

STUDY = Study(
    name="store",
    base_models=["hopeless"],
    arms=[arm("grpo", "grpo", kl_coef=0.0)],
    seeds=[0],
    budget=Budget(max_steps={STEPS}, prompts_per_step=2, group_size=2, max_new_tokens=12),
    eval=EvalSpec(every=2, max_problems=2, n_samples=2, ks=(1,)),
    passk=None,
    checkpoint_every=2,
)
"""


@pytest.fixture(scope="module")
def study_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("study") / "store.py"
    path.write_text(textwrap.dedent(STUDY))
    return path


@pytest.fixture
def study(study_path):
    return load_study(study_path)


def cli(*args: str, env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    command = [sys.executable, "-m", "ablate.commands.cli", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, **kwargs)


def errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if not line.startswith("warning: ")]


def assert_exactly_once(study, uri: str) -> None:
    ledger = study_ledger(uri, study.name)
    ids = [t.id for t in identified_trials(study)]
    assert exactly_once_problems(ledger, ids, range(1, STEPS + 1), "reward/mean") == []
    assert exactly_once_problems(ledger, ids, [0, 2, 4], "eval/pass_at_1") == []


# --- the MLflow database: built whole, or named -----------------------------------------------
@pytest.fixture(scope="module")
def leftover_statement(tmp_path_factory) -> int:
    """The number of the first build statement after MLflow creates a migration's temporary
    table (`_alembic_tmp_*`): a kill there leaves the half-made file every run stopped on."""
    import sqlalchemy as sa

    said: list[str] = []

    def record(conn, cursor, statement, *rest) -> None:
        said.append(statement)

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", record)
    try:
        mlflow_schema.build(tmp_path_factory.mktemp("schema") / "mlflow.db")
    finally:
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", record)
    first = next(i for i, s in enumerate(said, 1) if "CREATE TABLE _alembic_tmp_" in s)
    return first + 1


@pytest.fixture(scope="module")
def half_made(leftover_statement, study_path, tmp_path_factory) -> Path:
    """`ablate run` SIGKILLed inside the database's build: what it leaves, kept for the tests
    below (a copy each)."""
    results = tmp_path_factory.mktemp("killed") / "results"
    fault = {"ABLATE_FAULT": f"{mlflow_schema.POINT}@{leftover_statement}"}
    killed = cli("run", str(study_path), "--results", str(results), env=fault)
    assert killed.returncode == -9, killed.stderr[-2000:]
    return results


def test_a_kill_while_the_database_is_built_leaves_none_and_a_rerun_builds_it(
    half_made, study, tmp_path
):
    results = tmp_path / "results"
    shutil.copytree(half_made, results)
    assert not (results / "mlflow.db").exists()  # only the temporary one, which nobody reads
    building = results / ".mlflow.db.creating"
    assert mlflow_schema.read_schema(building).leftovers  # killed mid-migration indeed
    (outcome,) = run_study(study, results_dir=results)
    assert outcome.outcome == "finished"
    assert not building.exists()  # replaced by the whole one
    assert_exactly_once(study, tracking.default_uri(results))


def test_a_half_made_empty_database_an_older_build_left_is_rebuilt(half_made, study, tmp_path):
    results = tmp_path / "results"
    shutil.copytree(half_made, results)
    db = results / "mlflow.db"
    (results / ".mlflow.db.creating").rename(db)  # as MLflow's in-place build leaves it
    before = mlflow_schema.read_schema(db)
    assert before.leftovers and before.version != mlflow_schema.head_revision()
    (outcome,) = run_study(study, results_dir=results)
    assert outcome.outcome == "finished"
    assert mlflow_schema.read_schema(db).leftovers == ()
    assert_exactly_once(study, tracking.default_uri(results))


def test_a_half_made_database_holding_runs_is_one_line_with_its_repair(
    half_made, study_path, study, tmp_path, capsys
):
    results = tmp_path / "results"
    shutil.copytree(half_made, results)
    db = results / "mlflow.db"
    (results / ".mlflow.db.creating").rename(db)
    with sqlite3.connect(db) as conn:  # a run someone cares about
        conn.execute(
            "INSERT INTO experiments (experiment_id, name, artifact_location, lifecycle_stage) "
            "VALUES (7, 'kept', '/tmp/kept', 'active')"
        )
        conn.execute(
            "INSERT INTO runs (run_uuid, name, source_type, status, start_time, lifecycle_stage, "
            "experiment_id) VALUES ('k' || hex(randomblob(15)), 'kept', 'LOCAL', 'FINISHED', 0, "
            "'active', 7)"
        )
    untouched = db.read_bytes()
    assert main(["run", str(study_path), "--results", str(results)]) == 2
    (line,) = errors(capsys.readouterr().err)
    assert line.startswith(f"error: {db} holds 1 run(s) but its MLflow schema is half-upgraded")
    assert line.endswith(f"ablate repair --tracking-uri sqlite:///{db}")
    assert db.read_bytes() == untouched and not (results / study.name).exists()
    for command in ("status", "report"):  # the commands that only read say it too
        out = [] if command == "status" else ["--out", str(tmp_path / "out")]
        assert main([command, str(study_path), "--results", str(results), *out]) == 2
        (line,) = errors(capsys.readouterr().err)
        assert "half-upgraded" in line and line.endswith(
            f"ablate repair --tracking-uri sqlite:///{db}"
        )
    with pytest.raises(StoreError, match="holds 1 run"):  # the runner's own check says it too
        tracking.open_store(tracking.default_uri(results)).init()
    assert db.read_bytes() == untouched
    # the repair the line gives, as a user would run it
    assert main(["repair", "--tracking-uri", f"sqlite:///{db}"]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"{db} repaired: ") and f"(as it was: {db}.bak)" in said
    assert (results / "mlflow.db.bak").read_bytes() == untouched
    assert mlflow_schema.read_schema(db).version == mlflow_schema.head_revision()
    (outcome,) = run_study(study, results_dir=results)
    assert outcome.outcome == "finished"
    assert_exactly_once(study, tracking.default_uri(results))
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM runs WHERE name = 'kept'").fetchone() == (1,)
    assert main(["repair", "--results", str(results)]) == 0  # whole now: nothing to do
    assert "is whole" in capsys.readouterr().out


# --- every disk error: one line, exit 2, the trial left to resume ------------------------------
def _fsize_limit(limit: int):
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_a_file_size_limit_at_a_checkpoint_is_one_line_and_a_rerun_recovers(
    study_path, study, tmp_path
):
    """A real `ulimit -f` (EFBIG): the database (~1 MB) fits, the checkpoint (~2 MB) does not."""
    results = tmp_path / "results"
    run = ("run", str(study_path), "--results", str(results), "--out", str(tmp_path / "out"))
    limited = cli(*run, preexec_fn=_fsize_limit(1_600_000))
    assert limited.returncode == 2, limited.stderr[-2000:]
    (line,) = errors(limited.stderr)
    assert "Traceback" not in limited.stderr
    assert line.startswith("error: the results store cannot be written (")
    assert "/checkpoints/step-000002.tmp-" in line and "File too large" in line
    assert "over the file-size limit (ulimit -f): raise it" in line
    uri = tracking.default_uri(results)
    runs = tracking.open_store(uri).runs(study.name).runs
    assert list(runs["status"]) == ["RUNNING"]  # the disk's fault: not FAILED, it resumes
    (outcome,) = run_study(study, results_dir=results)  # the limit lifted
    assert outcome.outcome == "finished"
    assert_exactly_once(study, uri)


@pytest.mark.parametrize("code", [errno.EFBIG, errno.EDQUOT, errno.EROFS, errno.ENOSPC])
def test_every_disk_error_at_a_checkpoint_is_the_stores(code, study, tmp_path, monkeypatch):
    from ablate.stages import checkpoint

    study = dataclasses.replace(study, name=f"disk_{errno.errorcode[code].lower()}")
    results = tmp_path / "results"
    real = checkpoint.save_model

    def fails_at_step_4(model, where, *args, **kwargs):
        if "step-000004" in str(where):
            raise OSError(code, os.strerror(code), str(where))
        return real(model, where, *args, **kwargs)

    monkeypatch.setattr(checkpoint, "save_model", fails_at_step_4)
    with pytest.raises(StoreError, match=rf"step-000004.*{re.escape(os.strerror(code))}"):
        run_study(study, results_dir=results)
    uri = tracking.default_uri(results)
    assert list(tracking.open_store(uri).runs(study.name).runs["status"]) == ["RUNNING"]
    monkeypatch.setattr(checkpoint, "save_model", real)
    (outcome,) = run_study(study, results_dir=results)
    assert outcome.outcome == "finished"
    assert_exactly_once(study, uri)


def test_a_file_size_limit_on_the_file_stores_metrics_names_the_file(study, tmp_path, monkeypatch):
    from ablate.tracking import files_run

    uri = f"jsonl://{tmp_path}/store"
    write = files_run._write_all
    calls = []

    def efbig_on_the_second_append(fd, data):
        calls.append(len(data))
        if len(calls) == 3:  # the second append's first part
            raise OSError(errno.EFBIG, os.strerror(errno.EFBIG))
        write(fd, data)

    monkeypatch.setattr(files_run, "_write_all", efbig_on_the_second_append)
    with pytest.raises(StoreError) as raised:
        run_study(study, results_dir=tmp_path / "results", tracking_uri=uri)
    assert "/metrics.jsonl: OSError: [Errno 27] File too large" in str(raised.value)
    assert "ulimit -f" in str(raised.value)
    assert list(tracking.open_store(uri).runs(study.name).runs["status"]) == ["RUNNING"]
    monkeypatch.setattr(files_run, "_write_all", write)
    (outcome,) = run_study(study, results_dir=tmp_path / "results", tracking_uri=uri)
    assert outcome.outcome == "finished"
    assert_exactly_once(study, uri)


# --- damaged files of the file store: named, with what to do -----------------------------------
@pytest.fixture(scope="module")
def file_store(study_path, tmp_path_factory) -> tuple[Path, str]:
    """The study run to the end on the file store, once for the tests below (a copy each)."""
    root = tmp_path_factory.mktemp("filestore")
    uri = f"jsonl://{root}/store"
    run_study(load_study(study_path), results_dir=root / "results", tracking_uri=uri)
    return root, uri


def _copy(file_store, tmp_path) -> tuple[Path, str]:
    root, _ = file_store
    shutil.copytree(root / "results", tmp_path / "results")
    shutil.copytree(root / "store", tmp_path / "store")
    return tmp_path / "results", f"jsonl://{tmp_path}/store"


def _run_folders(uri: str) -> dict[str, Path]:
    """kind ("study" or "trial") -> its run's folder."""
    import json

    out = {}
    for folder in Path(uri.removeprefix("jsonl://")).glob("*/runs/*"):
        out[json.loads((folder / "tags.json").read_text())["ablate.kind"]] = folder
    return out


@pytest.mark.parametrize("damaged", ["trial run.json", "trial tags.json", "study study.json"])
@pytest.mark.parametrize("command", ["status", "report", "run"])
def test_a_damaged_file_store_file_is_one_line_naming_it(
    damaged, command, file_store, study_path, tmp_path, capsys
):
    results, uri = _copy(file_store, tmp_path)
    kind, name = damaged.split()
    folder = _run_folders(uri)[kind]
    path = folder.parent.parent / name if name == "study.json" else folder / name
    good = path.read_text()
    path.write_text(good[: len(good) // 2])  # cut short: what a bad disk or a hand leaves
    argv = [command, str(study_path), "--results", str(results), "--tracking-uri", uri]
    argv += [] if command == "status" else ["--out", str(tmp_path / "out")]
    assert main(argv) == 2
    (line,) = errors(capsys.readouterr().err)
    assert line.startswith(f"error: {path} is damaged (JSONDecodeError: "), line
    assert "restore it from a copy, or move the" in line
    path.write_text(good)  # restored: everything reads again, nothing was marked FAILED
    assert main(["status", str(study_path), "--results", str(results), "--tracking-uri", uri]) == 0
    assert capsys.readouterr().out.strip().endswith("1 FINISHED")


def test_a_damaged_file_while_a_trial_resumes_leaves_it_to_resume(study, tmp_path, monkeypatch):
    """The trial's tags.json damaged after a kill: the rerun stops in one StoreError without
    marking the trial FAILED; restored, the rerun resumes it exactly once."""
    from ablate.study.runner import RunHooks

    uri, results = f"jsonl://{tmp_path}/store", tmp_path / "results"

    class Killed(BaseException):
        pass

    def kill_at_3(done, total, metrics):
        if done == 3:
            raise Killed

    with pytest.raises(Killed):
        run_study(study, results_dir=results, tracking_uri=uri, hooks=RunHooks(on_step=kill_at_3))
    tags = _run_folders(uri)["trial"] / "tags.json"
    good = tags.read_text()
    tags.write_text("{")
    with pytest.raises(StoreError, match=rf"{tags} is damaged"):
        run_study(study, results_dir=results, tracking_uri=uri)
    tags.write_text(good)
    assert list(tracking.open_store(uri).runs(study.name).runs["status"]) == ["RUNNING"]
    (outcome,) = run_study(study, results_dir=results, tracking_uri=uri)
    assert outcome.outcome == "finished"
    assert_exactly_once(study, uri)


def test_a_damaged_metrics_line_is_named_and_never_counted(file_store, tmp_path):
    from ablate.base.durable import UnreadableFileWarning
    from ablate.tracking.files_run import METRICS, RunFolder

    _, uri = _copy(file_store, tmp_path)
    folder = _run_folders(uri)["trial"]
    lines = (folder / METRICS).read_text().splitlines(keepends=True)
    (folder / METRICS).write_text("".join([lines[0], "garbage\n", *lines[1:]]))
    with pytest.warns(UnreadableFileWarning, match=rf"{folder / METRICS}: line\(s\) 2 of"):
        rows = RunFolder(folder).metric_rows()
    assert len(rows) == len(lines)


def test_a_damaged_submission_or_report_table_is_named(file_store, study_path, tmp_path, capsys):
    results, uri = _copy(file_store, tmp_path)
    study = load_study(study_path)
    submission = results / study.name / "slurm" / "submission-20260101-000000-1.json"
    submission.parent.mkdir(parents=True)
    submission.write_text('{"tasks": ')
    assert main(["status", str(study_path), "--results", str(results), "--tracking-uri", uri]) == 2
    (line,) = errors(capsys.readouterr().err)
    assert line.startswith(f"error: {submission} is damaged (JSONDecodeError")
    assert "submit the study again" in line
    submission.unlink()
    passk = results / study.name / "passk.csv"
    passk.write_bytes(b"\xff\xfe garbage")
    out = ["--out", str(tmp_path / "out"), "--tracking-uri", uri]
    assert main(["report", str(study_path), "--results", str(results), *out]) == 2
    (line,) = errors(capsys.readouterr().err)
    assert line.startswith(f"error: {passk} is damaged (not text")
    assert "the next `ablate run` of the study writes it again" in line
