"""Logs of `ablate run` / `ablate train` when output is a file, and `ablate train --results`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from ablate.models import zoo_names

pytestmark = pytest.mark.skipif("hopeless" not in zoo_names(), reason="zoo not available")

STUDY = """
from ablate import Budget, EvalSpec, PassKSpec, Study, arm

STUDY = Study(
    name="logged",
    base_models=["hopeless"],
    arms=[arm("grpo", "grpo", kl_coef=0.0), arm("dr_grpo", "dr_grpo")],
    budget=Budget(max_steps=40, prompts_per_step=2, group_size=2, max_new_tokens=16),
    eval=EvalSpec(every=2, at_start=False, max_problems=2, n_samples=2, ks=(1,)),
    passk=PassKSpec(n=2, ks=(1, 2), max_problems=3),
)
"""


def test_a_killed_run_logged_to_a_file_says_where_it_was(tmp_path):
    study = tmp_path / "logged.py"
    study.write_text(textwrap.dedent(STUDY))
    log = tmp_path / "run.log"
    cmd = [sys.executable, "-m", "ablate.commands.cli", "run", str(study), "--log-every", "1"]
    cmd += ["--results", str(tmp_path / "results")]
    # killed as step 4's metrics reach the tracker: steps 1-3 were printed, nothing after
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ABLATE_FAULT": "step_logged@4"}
    with log.open("w") as out:
        proc = subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=300)
    assert proc.returncode == -signal.SIGKILL, log.read_text()[-2000:]
    lines = log.read_text().splitlines()
    text = "\n".join(lines)
    assert "phase: Pass@G" in text and "pass@G hopeless × plain: 3/3 prompts" in text
    assert "phase: trials" in text and "trial 1/2: grpo | hopeless | plain | seed 0" in text
    # the study's progress: after the plan and at the trial's start (nothing measured yet)
    first = "study: 0 of 2 trials done, 0 running, 2 left; time to go: measured after the first"
    assert sum(line.split(" ", 1)[1].startswith(first) for line in lines) == 1
    assert "study: 0 of 2 trials done, 1 running, 1 left; time to go: measured" in text
    steps = [line for line in lines if ": step " in line]
    assert [line.split(": step ")[1].split()[0] for line in steps[:3]] == ["1/40", "2/40", "3/40"]
    assert all(" reward " in line and " tokens " in line and " s/step" in line for line in steps)
    assert "pass@1 " in steps[1]  # the eval every 2 steps
    assert "━" not in text  # no progress bar drawn into a file


def test_a_run_with_workers_logs_every_trials_steps(tmp_path):
    """With --workers 2 the trials train in other processes; their steps still reach the log,
    each line named by its trial (they interleave)."""
    study = tmp_path / "logged.py"
    study.write_text(textwrap.dedent(STUDY).replace("max_steps=40", "max_steps=6"))
    cmd = [sys.executable, "-m", "ablate.commands.cli", "run", str(study), "--log-every", "2"]
    cmd += ["--results", str(tmp_path / "results"), "--workers", "2"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    stamped = [line.split(" ", 1) for line in done.stdout.splitlines() if line[2:3] == ":"]
    lines = [text for _, text in stamped]  # the progress lines, without their time stamps
    for arm in ("grpo", "dr_grpo"):
        label = f"{arm} | hopeless | plain | seed 0"
        assert any(line.startswith(f"trial started in a worker: {label} (id ") for line in lines)
        steps = [line.split(": step ")[1].split()[0] for line in lines if line.startswith(label)]
        assert steps == ["2/6", "4/6", "6/6"], lines
        assert sum(line.startswith(f"trial ended: {label}: finished") for line in lines) == 1
    studies = [line for line in lines if line.startswith("study: ")]
    assert studies[0].startswith("study: 0 of 2 trials done, 0 running, 2 left")
    assert " s/step, 2 in parallel)" in studies[-2]  # measured once a trial ended
    assert studies[-1] == "study: 2 of 2 trials done, 0 running, 0 left"


def test_train_with_results_is_a_trial_run_of_an_adhoc_study(tmp_path, capsys):
    from ablate import tracking
    from ablate.commands.cli import main

    results = tmp_path / "results"
    argv = ["train", "--steps", "2", "--eval-problems", "2", "--set", "group_size=2"]
    argv += ["--set", "prompts_per_step=2", "--results", str(results), "--model", "hopeless"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "grpo [group_size=2, prompts_per_step=2] on hopeless (plain), seed 0: finished" in out
    assert f"browse: ablate ui --results {results}" in out
    table = tracking.open_store(tracking.default_uri(results)).runs("train")
    runs = table.runs
    assert len(runs) == 1 and runs["status"].tolist() == ["FINISHED"]
    run = runs.iloc[0]
    # a study trial's tags, params and metrics
    assert run["arm"] == "grpo[group_size=2,prompts_per_step=2]"
    assert run["model"] == "hopeless" and run["outcome"] == "finished"
    assert table.params["budget.group_size"].iloc[0] == "2"
    from mlflow.tracking import MlflowClient

    tags = MlflowClient(tracking.default_uri(results)).get_run(run["run_id"]).data.tags
    assert '"group_size": 2' in tags["ablate.budget"]
    assert sum(c.startswith("algo.") for c in table.params.columns) >= 21
    assert table.metric("eval/pass_at_1").iloc[0] >= 0
    assert (results / "train" / "trials" / run["trial_id"]).is_dir()  # its checkpoints
    assert main(argv) == 0  # the same trial again: kept, not retrained
    assert "already FINISHED: nothing to train" in capsys.readouterr().out
    assert len(tracking.open_store(tracking.default_uri(results)).runs("train")) == 1


def test_train_refuses_run_dir_with_results(tmp_path, capsys):
    from ablate.commands.cli import main

    argv = ["train", "--run-dir", str(tmp_path / "a"), "--results", str(tmp_path / "b")]
    assert main(argv) == 2
    assert "give --run-dir or --results, not both" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_bars_for_trials_in_workers_come_and_go_with_their_trials():
    """On a terminal each trial in a worker gets its own bar, removed when the trial ends; a
    step relayed after the end (the queue and the result pipe race) brings no bar back."""
    import io
    from types import SimpleNamespace

    from rich.console import Console

    from ablate.commands.run_display import study_bars as _study_bars

    def trial(arm: str, seed: int):
        spec = SimpleNamespace(model="m", seed=seed, budget=SimpleNamespace(max_steps=6))
        return SimpleNamespace(id=f"{arm}{seed}", arm=arm, spec=spec)

    console = Console(file=io.StringIO(), force_terminal=True, width=120)
    a, b = trial("grpo", 0), trial("dapo", 1)
    with _study_bars(console, workers=2) as hooks:
        hooks.on_trial_step(a, 0, 0, {})
        hooks.on_trial_step(b, 0, 0, {})
        hooks.on_trial_step(a, 3, 6, {})

        def bars():
            return {t.description: t.completed for t in _progress(hooks).tasks if t.visible}

        study = "trials (2 running, 0 left)"
        assert bars() == {study: 0, "grpo | m | s0": 3, "dapo | m | s1": 0}
        hooks.on_trial_end(SimpleNamespace(trial_id=a.id))
        hooks.on_trial_step(a, 6, 6, {})  # late
        assert bars() == {"trials (1 running, 0 left)": 1, "dapo | m | s1": 0}


def _progress(hooks):
    """The rich Progress the display's hooks close over."""
    from rich.progress import Progress

    hooks_left, seen = [hooks.on_trial_step], []
    while hooks_left:  # through the study-progress hook that wraps the display's own
        cells = [c.cell_contents for c in hooks_left.pop().__closure__ or ()]
        seen += cells
        hooks_left += [c for c in cells if callable(c) and getattr(c, "__closure__", None)]
    return next(c for c in seen if isinstance(c, Progress))


def test_a_finished_parallel_run_lets_its_workers_exit_without_a_signal(tmp_path, monkeypatch):
    """Every trial done, the pool's workers exit on their own (the task queue's end); none is
    sent SIGTERM, which an idle worker whose signal lands on a helper thread never handles:
    the coordinator then waited on it for ever."""
    import multiprocessing.process

    from ablate.commands.cli import main

    signalled = []
    terminate = multiprocessing.process.BaseProcess.terminate

    def recording(process):
        if process.exitcode is None:  # a live worker being stopped by signal
            signalled.append(process.pid)
        terminate(process)

    monkeypatch.setattr(multiprocessing.process.BaseProcess, "terminate", recording)
    study = tmp_path / "logged.py"
    study.write_text(textwrap.dedent(STUDY).replace("max_steps=40", "max_steps=2"))
    argv = ["run", str(study), "--results", str(tmp_path / "results"), "--workers", "2"]
    assert main(argv) == 0
    assert signalled == []
