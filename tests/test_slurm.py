"""The Slurm launcher on a real single-node Slurm cluster (tests/slurm_cluster.py: slurm-wlm
22.05 and munge, installed when missing, started in a temporary folder): a study submitted as one
job array with `ablate run --launcher slurm` trains every trial exactly once, logs every
(metric, step) exactly once and reports what a local run of the same study reports; an array task
cancelled with `scancel` or killed with SIGKILL mid-trial leaves its trial to the next submission,
which resumes it from its checkpoint. Marked `slurm` (`make test-slurm`); skipped with the
one-line reason when Slurm cannot start here."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ablate import tracking
from ablate.stages.checkpoint import checkpoint_dirs
from ablate.study import load_study
from ablate.study.identity import identified_trials
from ablate.testing import exactly_once_problems, study_ledger, zoo_model_built

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.skipif(not zoo_model_built("hopeless"), reason="zoo model 'hopeless' not built"),
    pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy:DeprecationWarning"),
]

STUDY = """
from ablate.study import Budget, EvalSpec, Study, arm

STUDY = Study(
    name={name!r},
    base_models=["hopeless"],
    arms=[arm("grpo", "grpo", kl_coef=0.0), arm("dr_grpo", "dr_grpo")],
    seeds={seeds!r},
    budget=Budget(max_steps={steps}, prompts_per_step=2, group_size=2, max_new_tokens=8),
    eval=EvalSpec(every={steps}, max_problems=2, n_samples=2, ks=(1,)),
    passk=None,
    checkpoint_every=2,
)
"""
#: Per-step metrics that measure time or speed, not the training itself.
TIMING = re.compile(r"seconds|perf/|wall|per_s|throughput|time")
#: A report's columns of the same kind ("step s": seconds per step).
REPORT_TIMING = re.compile(r"seconds|wall|time|throughput|\bstep s\b|/s\b")


def write_study(folder: Path, name: str, seeds: list[int], steps: int) -> Path:
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(STUDY.format(name=name, seeds=seeds, steps=steps)))
    return path


def env(cluster) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k != "ABLATE_FAULT"}
    out.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    out.update(cluster.env())
    return out


def ablate(cluster, *args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "ablate.commands.cli", *args]
    done = subprocess.run(
        cmd, cwd=cwd, env=env(cluster), capture_output=True, text=True, timeout=timeout
    )
    return done


def slurm(cluster, *args: str) -> str:
    done = subprocess.run(args, env=env(cluster), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def ledger_problems(uri: str, study_file: Path, steps: int) -> list[str]:
    study = load_study(study_file)
    ids = [t.id for t in identified_trials(study)]
    ledger = study_ledger(uri, study.name)
    return exactly_once_problems(ledger, ids, range(1, steps + 1), "reward/mean")


def curves(uri: str, name: str) -> dict[str, dict[str, list[tuple[int, float]]]]:
    store = tracking.open_store(uri)
    table = store.runs(name)
    keys = [k for k in table.metrics.columns if not TIMING.search(k)]
    return {
        trial_id: {k: store.metric_history(run_id, k) for k in keys}
        for trial_id, run_id in zip(table.runs["trial_id"], table.runs["run_id"], strict=True)
    }


def report_tables(folder: Path) -> dict[str, str]:
    """Every CSV table of a report, timing columns aside (wall seconds differ run to run)."""
    import pandas as pd

    out = {}
    for path in sorted((folder / "tables").glob("*.csv")):
        if not path.read_text().strip():  # a table with nothing to show is an empty file
            out[path.name] = ""
            continue
        frame = pd.read_csv(path)
        keep = [c for c in frame.columns if not REPORT_TIMING.search(str(c))]
        out[path.name] = frame[keep].to_csv(index=False)
    return out


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := condition():
            return found
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def squeue_empty(cluster) -> bool:
    return slurm(cluster, "squeue", "--noheader", "--array").strip() == ""


def jobcomp(cluster, job_id: str) -> list[dict[str, str]]:
    """Slurm's own record of the array's tasks (the job completion log)."""
    rows = []
    for line in cluster.jobcomp.read_text().splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if fields.get("ArrayJobId") == job_id:
            rows.append(fields)
    return rows


def submissions(results: Path, name: str) -> list[dict]:
    found = sorted((results / name / "slurm").glob("submission-*.json"))
    return [json.loads(p.read_text()) for p in found]


def test_study_as_a_job_array_is_exactly_once_and_reports_like_a_local_run(slurm_cluster, tmp_path):
    steps = 2
    study_file = write_study(tmp_path, "arr6", seeds=[0, 1, 2], steps=steps)
    results, local = tmp_path / "slurm-results", tmp_path / "local-results"

    ran = ablate(
        slurm_cluster,
        *("run", str(study_file), "--launcher", "slurm", "--results", str(results)),
        *("--out", str(tmp_path / "slurm-reports")),
        cwd=tmp_path,
    )
    here = ablate(
        slurm_cluster,
        *("run", str(study_file), "--workers", "2", "--results", str(local)),
        *("--out", str(tmp_path / "local-reports")),
        cwd=tmp_path,
    )

    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert here.returncode == 0, here.stderr[-3000:]
    uri = tracking.default_uri(results)
    assert ledger_problems(uri, study_file, steps) == []
    [record] = submissions(results, "arr6")
    tasks = jobcomp(slurm_cluster, record["job_id"])
    assert len(tasks) == 6 and {t["JobState"] for t in tasks} == {"COMPLETED"}
    assert sorted(int(t["ArrayTaskId"]) for t in tasks) == list(range(6))
    assert curves(uri, "arr6") == curves(tracking.default_uri(local), "arr6")
    slurm_tables = report_tables(tmp_path / "slurm-reports" / "arr6")
    assert slurm_tables and slurm_tables == report_tables(tmp_path / "local-reports" / "arr6")

    again = ablate(
        slurm_cluster,
        "run",
        str(study_file),
        "--launcher",
        "slurm",
        "--results",
        str(results),
        "--out",
        str(tmp_path / "slurm-reports"),
        cwd=tmp_path,
    )

    assert again.returncode == 0 and "submitted" not in again.stdout  # nothing left to submit
    assert len(submissions(results, "arr6")) == 1
    status = ablate(
        slurm_cluster, "status", str(study_file), "--results", str(results), cwd=tmp_path
    )
    assert status.stdout.strip().endswith("6 FINISHED")


def start_detached(cluster, study_file: Path, results: Path) -> dict:
    """Submit with --detach; the submission's record (job id, trial -> array task)."""
    done = ablate(
        cluster,
        "run",
        str(study_file),
        "--launcher",
        "slurm",
        "--detach",
        "--results",
        str(results),
        cwd=study_file.parent,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return submissions(results, load_study(study_file).name)[-1]


def first_checkpoint(results: Path, name: str, trial_ids: list[str]) -> str | None:
    """A trial with a complete checkpoint (so a resume has something to resume from)."""
    for trial_id in trial_ids:
        if checkpoint_dirs(results / name / "trials" / trial_id):
            return trial_id
    return None


def task_logs(results: Path, name: str, tail: int = 1500) -> str:
    """The end of every array task's submitit log (what a failed assertion shows)."""
    files = sorted((results / name / "slurm" / "logs").rglob("*"))
    return "\n".join(
        f"== {f.name}\n{f.read_text(errors='replace')[-tail:]}" for f in files if f.is_file()
    )


def lease_owner(results: Path, name: str, trial_id: str) -> str | None:
    uri = tracking.default_uri(results)
    held = tracking.leases_of(tracking.open_store(uri), results).holder(f"{name}/{trial_id}")
    return held[0] if held else None


@pytest.mark.parametrize("how", ["scancel", "sigkill"])
def test_a_task_stopped_mid_trial_is_resumed_by_the_next_submission(how, slurm_cluster, tmp_path):
    # long enough that the trial is still training when its first checkpoint is seen: at 8
    # steps a quiet machine finished it before the stop (CI, 2026-12-03)
    steps = 40
    name = f"stop{how}"
    study_file = write_study(tmp_path, name, seeds=[0], steps=steps)
    results = tmp_path / "results"
    uri = tracking.default_uri(results)
    record = start_detached(slurm_cluster, study_file, results)
    ids = list(record["tasks"])
    victim = wait_for(lambda: first_checkpoint(results, name, ids), 300, "a first checkpoint")

    if how == "scancel":
        slurm(slurm_cluster, "scancel", record["tasks"][victim])
    else:  # the trainer's own process, by the pid in its lease (host:pid:nonce)
        owner = lease_owner(results, name, victim)
        os.kill(int(owner.split(":")[1]), signal.SIGKILL)
    wait_for(lambda: squeue_empty(slurm_cluster), 300, "the array to end")

    runs = tracking.open_store(uri).runs(name).runs
    stopped = dict(zip(runs["trial_id"], runs["status"], strict=True))[victim]
    # scancel: SIGTERM stops the trial cleanly (run KILLED, lease released); SIGKILL: nothing
    # could close anything (run RUNNING, lease held by a dead process)
    if how == "scancel":
        logs = task_logs(results, name)
        assert stopped == "KILLED", f"run {stopped} after scancel; the tasks' logs:\n{logs}"
        assert lease_owner(results, name, victim) is None, logs
        states = {t["JobState"] for t in jobcomp(slurm_cluster, record["job_id"])}
        assert "CANCELLED" in states
    else:
        assert stopped == "RUNNING" and lease_owner(results, name, victim) is not None

    rerun = ablate(
        slurm_cluster,
        "run",
        str(study_file),
        "--launcher",
        "slurm",
        "--results",
        str(results),
        "--out",
        str(tmp_path / "reports"),
        cwd=tmp_path,
    )

    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    assert [list(s["tasks"]) for s in submissions(results, name)][-1].count(victim) == 1
    assert victim in submissions(results, name)[-1]["tasks"]
    assert ledger_problems(uri, study_file, steps) == []
    runs = tracking.open_store(uri).runs(name).runs
    resumes = dict(zip(runs["trial_id"], runs["resumes"], strict=True))
    assert resumes[victim] == 1  # the same MLflow run, continued from its checkpoint
    assert lease_owner(results, name, victim) is None
