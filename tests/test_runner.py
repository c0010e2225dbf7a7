"""`ablate run`: Pass@G phase, trials into MLflow, resume after SIGKILL without duplicates."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ablate import tracking
from ablate.models import zoo_names
from ablate.study import load_study
from ablate.study.identity import identified_trials

pytestmark = pytest.mark.skipif("hopeless" not in zoo_names(), reason="zoo not available")

STUDY = """
from ablate.study import Budget, ElicitSpec, EvalSpec, PassKSpec, Study, arm

STUDY = Study(
    name="six",
    base_models=["hopeless"],
    arms=[
        arm("grpo", "grpo", kl_coef=0.0),
        arm("dr_grpo", "dr_grpo"),
        arm("gspo", "gspo", minibatches=2),
    ],
    seeds=[0, 1],
    budget=Budget(max_steps={steps}, prompts_per_step=2, group_size=2, max_new_tokens=16),
    eval=EvalSpec(at_start=False, max_problems=2, n_samples=2, ks=(1,)),
    passk={passk},
    checkpoint_every=1,
)
"""


def write_study(tmp_path: Path, steps: int, passk: str = "None") -> Path:
    path = tmp_path / "six.py"
    path.write_text(textwrap.dedent(STUDY.format(steps=steps, passk=passk)))
    return path


def ablate_run(study: Path, results: Path, fault: str = "", **kw) -> subprocess.Popen:
    """`ablate run` in a child process; `fault`: an `ABLATE_FAULT` point that kills it."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", **({"ABLATE_FAULT": fault} if fault else {})}
    cmd = [
        sys.executable,
        "-m",
        "ablate.commands.cli",
        "run",
        str(study),
        "--results",
        str(results),
    ]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)


def finished_runs(results: Path):
    return tracking.open_store(tracking.default_uri(results)).runs("six")


def test_sigkill_mid_trial_then_rerun_gives_exactly_six_finished_runs(tmp_path):
    study, results = write_study(tmp_path, steps=6), tmp_path / "results"
    # killed at the second trial's step-3 checkpoint: the first trial has then finished
    proc = ablate_run(study, results, fault="checkpoint_renamed@3#2")
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL, err.decode()[-2000:]
    killed = finished_runs(results).runs
    assert sorted(killed["status"]) == ["FINISHED", "RUNNING"], "one finished, one killed"
    rerun = ablate_run(study, results)
    _, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err.decode()[-2000:]
    table = finished_runs(results)
    runs = table.runs
    expected = {t.id for t in identified_trials(load_study(study))}
    assert len(runs) == 6 and set(runs["trial_id"]) == expected
    assert set(runs["status"]) == {"FINISHED"}
    params = [c for c in table.params.columns if c.startswith("algo.")]
    assert len(params) >= 21  # every Algorithm field is a param


def test_passk_phase_and_elicitation_are_logged_and_cached(tmp_path):
    elicit = "ElicitSpec(templates=['plain', 'plain_q'], shots=(0, 1), selection_problems=3, n=2)"
    passk = f"PassKSpec(n=2, ks=(1, 2), max_problems=3, elicit={elicit})"
    study, results = write_study(tmp_path, steps=1, passk=passk), tmp_path / "results"
    for _ in range(2):
        proc = ablate_run(study, results)
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()[-2000:]
    cache = sorted(f.name.split("-")[0] for f in (results / "passk-cache").glob("*.csv"))
    assert len(cache) == 2 and "elicit" in cache  # computed once each, then cached
    table = (results / "six" / "passk.csv").read_text().splitlines()
    assert table[0].startswith("model,template,k") and len(table) == 1 + 2  # k = 1, 2
    import pandas as pd

    e = pd.read_csv(results / "six" / "elicitation.csv")
    grid = e[e["split"] == "selection"]
    # 2 templates × 2 shot counts × 1 temperature × 2 parses, 3 selection problems each
    assert len(grid) == 8 * 3 and set(grid["problem_id"]).isdisjoint(
        e[e["split"] == "eval"]["problem_id"]
    )
    roles = e[e["split"] == "eval"].groupby("role")["problem_id"].count().to_dict()
    assert roles == {
        "as_trained": 2,
        "lenient": 2,
        "best": 2,
        "best_prompt": 2,
    }  # eval max_problems
    _assert_one_tag_namespace(results)


def _assert_one_tag_namespace(results: Path) -> None:
    """Every tag ablate writes on the parent and the trial runs is under `ablate.`."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking.default_uri(results))
    experiment = client.get_experiment_by_name("six")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 1 + 6  # the study's parent run and its trials
    keys = {k for run in runs for k in run.data.tags}
    assert {"ablate.outcome", "ablate.trial_id", "ablate.git.commit", "ablate.diff"} <= keys
    assert {"ablate.algo.clip_high", "ablate.version.torch"} <= keys
    foreign = sorted(k for k in keys if not k.startswith(("ablate.", "mlflow.")))
    assert not foreign, f"tags outside the ablate namespace: {foreign}"
