"""The file store (`jsonl:///abs/folder`), the second adapter of the tracking port: the port's
contract on its own (fast), processes racing on one study, and the runner, `--workers 2`, a
SIGKILL in the middle of a metrics append and the report, end to end on it."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from ablate.commands.cli import main
from ablate.study import load_study
from ablate.study.identity import identified_trials
from ablate.study.runner import run_study
from ablate.testing import exactly_once_problems, study_ledger, zoo_model_built
from ablate.tracking import StudyRun, StudyStore, Tracker, open_store, ui_of
from ablate.tracking.files import FileStore
from ablate.tracking.files_run import METRICS


@pytest.fixture
def uri(tmp_path) -> str:
    return f"jsonl://{tmp_path}/store"


@pytest.fixture
def store(uri) -> FileStore:
    store = open_store(uri)
    store.init()
    return store


def trial(study: StudyRun, trial_id: str, **tags: str) -> Tracker:
    return study.trial_tracker(trial_id, run_name=f"run-{trial_id}", tags=tags)


# --- the port's contract ---------------------------------------------------------------------


def test_the_file_store_implements_the_port(store, tmp_path):
    assert isinstance(store, StudyStore) and ui_of(store) is None
    study = store.open_study("s")
    assert isinstance(study, StudyRun) and isinstance(trial(study, "a"), Tracker)
    with pytest.raises(ValueError, match="absolute"):
        open_store("jsonl://relative/folder")
    assert not open_store(f"jsonl://{tmp_path}/none").exists()  # opening creates nothing
    assert not (tmp_path / "none").exists()


def test_parent_trial_runs_tags_and_the_run_table(store):
    study = store.open_study("table")
    assert store.open_study("table").run_id == study.run_id  # found again, not made twice
    done = trial(study, "done", **{"ablate.arm": "grpo", "ablate.seed": "3"})
    done.log_params({"algo.clip_high": 0.28, "pair": (1, 2)})
    done.log_params({"algo.clip_high": 0.28})  # a resumed trial logs the same params again
    with pytest.raises(ValueError, match="changed"):
        done.log_params({"algo.clip_high": 0.2})
    for step in range(3):
        done.log_metrics({"eval/pass_at_1": step / 10, "loss": float("nan")}, step)
    done.set_tags({"ablate.outcome": "finished"})
    done.close()
    failed = trial(study, "failed")
    failed.close("FAILED")
    running = trial(study, "running")
    assert study.trial_status() == {"done": "FINISHED", "failed": "FAILED", "running": "RUNNING"}
    table = store.runs("table")
    assert table.runs["trial_id"].tolist() == ["done", "failed", "running"]  # oldest first
    row = table.runs.iloc[0]
    assert (row["arm"], row["seed"], row["outcome"], row["status"]) == (
        "grpo",
        3,
        "finished",
        "FINISHED",
    )
    assert row["end_time"] >= row["start_time"] and pd.isna(table.runs["end_time"].iloc[2])
    assert table.metrics_of(done.run_id) == {"eval/pass_at_1": 0.2}  # NaN never stored
    assert (
        table.params["algo.clip_high"].iloc[0] == "0.28"
        and table.params["pair"].iloc[0] == "[1, 2]"
    )
    assert store.metric_history(done.run_id, "eval/pass_at_1") == [(0, 0.0), (1, 0.1), (2, 0.2)]
    assert running.run_id in set(table.runs["run_id"])
    assert store.runs("no-such-study").empty and store.find_study("no-such-study") is None


def test_resume_skips_held_steps_and_a_finished_trial_is_refused(store):
    study = store.open_study("resume")
    first = trial(study, "r")
    for step in range(4):
        first.log_metrics({"reward/mean": float(step)}, step)
    first.flush()  # then killed: the run stays RUNNING
    resumed = trial(study, "r")
    assert resumed.run_id == first.run_id
    for step in range(2, 6):  # 2-3 recomputed after a checkpoint at step 1, then new ones
        resumed.log_metrics({"reward/mean": 10.0 + step, "new": 1.0}, step)
    resumed.close()
    assert store.metric_rows_per_step(resumed.run_id, "reward/mean") == dict.fromkeys(range(6), 1)
    assert store.metric_history(resumed.run_id, "reward/mean")[-2:] == [(4, 14.0), (5, 15.0)]
    assert store.runs("resume").runs["resumes"].tolist() == [1]
    with pytest.raises(ValueError, match="FINISHED"):
        trial(study, "r")


def test_a_torn_last_line_is_no_row_and_is_cut_before_the_next_append(store):
    study = store.open_study("torn")
    first = trial(study, "t")
    first.log_metrics({"a": 1.0, "b": 2.0}, 0)
    first.flush()
    path = next(store.root.glob(f"*/runs/{first.run_id}/{METRICS}"))
    with open(path, "ab") as handle:  # what a kill in the middle of an append leaves
        handle.write(b'{"k": "a", "v": 3.0, "t": 1, "s"')
    assert store.metric_rows_per_step(first.run_id, "a") == {0: 1}
    resumed = trial(study, "t")
    resumed.log_metrics({"a": 3.0}, 1)
    resumed.close()
    lines = path.read_text().splitlines()
    assert [json.loads(line)["s"] for line in lines] == [0, 0, 1]  # every line whole
    assert store.metric_history(resumed.run_id, "a") == [(0, 1.0), (1, 3.0)]


def test_artifacts_samples_and_attach_keep_the_run_status(store, tmp_path):
    study = store.open_study("artifacts")
    tracker = trial(study, "s")
    tracker.log_samples(
        "eval", [{"correct": True, "length": 3}, {"correct": False, "length": 5}], 2
    )
    tracker.log_dict({"shape": (2, 3)}, "config.json")
    assert store.list_artifacts(tracker.run_id) == ["config.json", "samples"]
    assert store.list_artifacts(tracker.run_id, "samples") == ["samples/eval_step000002.parquet"]
    folder = store.download_artifacts(tracker.run_id, "samples", tmp_path / "dl")
    frame = pd.read_parquet(folder / "eval_step000002.parquet")
    assert frame["length"].tolist() == [3, 5]
    (tmp_path / "report" / "tables").mkdir(parents=True)
    (tmp_path / "report" / "report.md").write_text("# r")
    (tmp_path / "report" / "tables" / "main.csv").write_text("a\n1\n")
    store.find_study("artifacts").attach(tmp_path / "report", "report")
    assert store.list_artifacts(study.run_id, "report") == ["report/report.md", "report/tables"]
    assert store.list_artifacts(study.run_id, "report/tables") == ["report/tables/main.csv"]
    assert _status(store, study.run_id) == "RUNNING"  # attaching never closes a study
    study.close()
    store.find_study("artifacts").attach(tmp_path / "report" / "report.md", "again")
    assert _status(store, study.run_id) == "FINISHED"


def test_mark_plan_leaves_dropped_trials_out_of_the_table(store):
    study = store.open_study("edited")
    for trial_id in ("old-0", "new-0", "new-1"):
        trial(study, trial_id).close()
    assert study.mark_plan({"new-0", "new-1"}) == 1
    assert sorted(store.runs("edited").runs["trial_id"]) == ["new-0", "new-1"]


def _status(store: FileStore, run_id: str) -> str:
    return json.loads(next(store.root.glob(f"*/runs/{run_id}/run.json")).read_text())["status"]


def _race(uri: str, index: int) -> None:
    """One of several processes opening a study at once, each training its own trial."""
    study = open_store(uri).open_study("race")
    study.set_tags({f"worker.{index}": "here"})
    tracker = study.trial_tracker(f"t{index}", run_name=f"t{index}", tags={})
    for step in range(30):
        tracker.log_metrics({"x": float(step)}, step)
    tracker.close()


def test_processes_racing_on_one_study_make_one_parent_and_lose_no_write(store, uri):
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_race, args=(uri, i)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * 4
    (folder,) = store.root.glob("race-*")  # one study folder
    parents = [p for p in (folder / "runs").iterdir() if '"study"' in (p / "tags.json").read_text()]
    assert len(parents) == 1
    tags = json.loads((parents[0] / "tags.json").read_text())
    assert {f"worker.{i}" for i in range(4)} <= tags.keys()  # no tag update lost
    table = store.runs("race")
    assert sorted(table.runs["trial_id"]) == ["t0", "t1", "t2", "t3"]
    for run_id in table.runs["run_id"]:
        assert store.metric_rows_per_step(run_id, "x") == dict.fromkeys(range(30), 1)


def test_ablate_ui_on_a_file_store_is_one_line(uri, tmp_path, capsys):
    assert main(["ui", "--tracking-uri", uri]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ablate ui needs an MLflow database") and "file store" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "store").exists()


# --- end to end: the runner, workers, a kill mid-append and the report on the file store -----

needs_zoo = pytest.mark.skipif(not zoo_model_built("hopeless"), reason="zoo not available")

STEPS = 6
KILL_STUDY = f"""
from ablate.study import Budget, EvalSpec, Study, arm

STUDY = Study(
    name="torn",
    base_models=["hopeless"],
    arms=[arm("grpo", "grpo", kl_coef=0.0)],
    seeds=[0],
    budget=Budget(max_steps={STEPS}, prompts_per_step=2, group_size=2, max_new_tokens=12),
    eval=EvalSpec(every=3, max_problems=2, n_samples=2, ks=(1,)),
    passk=None,
    checkpoint_every=2,
)
"""
WORKERS_STUDY = """
from ablate.study import Budget, EvalSpec, Study, arm

STUDY = Study(
    name="pair",
    base_models=["hopeless"],
    arms=[arm("grpo", "grpo", kl_coef=0.0), arm("dr_grpo", "dr_grpo")],
    seeds=[0],
    budget=Budget(max_steps=2, prompts_per_step=2, group_size=2, max_new_tokens=12),
    eval=EvalSpec(every=1, max_problems=2, n_samples=2, ks=(1,)),
    passk=None,
)
"""


def _write(folder: Path, text: str) -> Path:
    path = folder / "study.py"
    path.write_text(textwrap.dedent(text))
    return path


def _ablate(*args: str, fault: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ABLATE_FAULT": fault}
    cmd = [sys.executable, "-m", "ablate.commands.cli", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


@needs_zoo
def test_sigkill_mid_append_then_rerun_is_exactly_once_and_bit_identical(tmp_path):
    study_file = _write(tmp_path, KILL_STUDY)
    study, results = load_study(study_file), tmp_path / "results"
    uri = f"jsonl://{tmp_path}/store"
    reference = dataclasses.replace(study, name="reference")
    run_study(reference, results_dir=tmp_path / "reference", tracking_uri=uri)

    killed = _ablate(
        "run",
        str(study_file),
        "--results",
        str(results),
        "--tracking-uri",
        uri,
        fault="metrics_append@4",
    )
    assert killed.returncode == -9, killed.stderr[-2000:]
    store = open_store(uri)
    (run_id,) = store.runs("torn").runs["run_id"]
    (path,) = store.root.glob(f"*/runs/{run_id}/{METRICS}")
    assert not path.read_bytes().endswith(b"\n")  # the kill cut a line in half
    held = {
        k for k in store.runs("torn").metrics.columns if 4 in store.metric_rows_per_step(run_id, k)
    }

    run_study(study, results_dir=results, tracking_uri=uri)  # from the step-2 checkpoint

    ids = [t.id for t in identified_trials(study)]
    ledger = study_ledger(uri, "torn")
    assert exactly_once_problems(ledger, ids, range(1, STEPS + 1), "reward/mean") == []
    assert exactly_once_problems(ledger, ids, [0, 3, 6], "eval/pass_at_1") == []
    torn = {k for k, counts in ledger["rows"][ids[0]].items() if 4 in counts} - held
    assert len(torn) == 1  # the half-written row was not counted, and is logged once now
    assert all(json.loads(line) for line in path.read_text().splitlines())
    (ref_run,) = store.runs("reference").runs["run_id"]
    assert store.metric_history(run_id, "reward/mean") == store.metric_history(
        ref_run, "reward/mean"
    )


@needs_zoo
def test_ablate_run_with_two_workers_and_its_report_on_the_file_store(tmp_path):
    study_file, uri = _write(tmp_path, WORKERS_STUDY), f"jsonl://{tmp_path}/store"
    results, reports = tmp_path / "results", tmp_path / "reports"
    done = _ablate(
        "run",
        str(study_file),
        "--results",
        str(results),
        "--tracking-uri",
        uri,
        "--workers",
        "2",
        "--out",
        str(reports),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"file store: {uri}" in done.stdout and "no UI for this store" in done.stdout
    store = open_store(uri)
    study = load_study(study_file)
    ids = [t.id for t in identified_trials(study)]
    assert exactly_once_problems(study_ledger(uri, "pair"), ids, [1, 2], "reward/mean") == []
    assert (reports / "pair" / "report.md").is_file()
    main_table = pd.read_csv(reports / "pair" / "tables" / "main.csv")
    assert set(main_table["arm"]) == {"grpo", "dr_grpo"}
    parent = store.find_study("pair")
    assert "report/report.html" in store.list_artifacts(parent.run_id, "report")
    assert _status(store, parent.run_id) == "FINISHED"
    assert not (results / "mlflow.db").exists()  # nothing went to the default MLflow store
