"""Damaged files of the tuning and recipe phases (issue 63): a final checkpoint the recipe phase
needs is that checkpoint or a one-line refusal naming it, never an older one standing in; a recipe
result cut short is measured again; a damaged tuning.csv read by `ablate status` is one line
naming it; a path past the file system's limits is one line, exit code 2."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest
import torch

from ablate.commands.cli import main
from ablate.stages.checkpoint import (
    ENGINE,
    WEIGHTS,
    CorruptCheckpoint,
    checkpoint_dirs,
    load_newest,
    save_checkpoint,
)
from ablate.study.runner import run_study
from ablate.study.study import load_study
from ablate.testing import one_error, tiny_llama, zoo_model_built

pytestmark = [
    pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:each eval reads 3 problems"),
]

#: A stale sampler (its checkpoints carry `engine.pt`), 3 steps checkpointed at every one, and
#: the recipe phase: 4 recipes of the final checkpoint.
RECIPES = """
from ablate import Budget, EvalSpec, Study, arm
from ablate.factors.eval_spec import Recipes

STUDY = Study(
    name="stale",
    base_models=["hopeless"],
    arms=[arm("grpo", "grpo", kl_coef=0.0, rollout_staleness=1)],
    seeds=[0],
    checkpoint_every=1,
    budget=Budget(max_steps=3, prompts_per_step=2, group_size=2, max_new_tokens=8),
    eval=EvalSpec(
        at_start=False, max_problems=3, n_samples=2, ks=(1,),
        robustness=Recipes(decode_seeds=2, temperatures=(0.5,)),
    ),
    passk=None,
)
"""

TUNED = """
from ablate import Budget, EvalSpec, Study, TuneSpec, arm, log_range

STUDY = Study(
    name="fair",
    base_models=["hopeless"],
    arms=[arm("grpo", "grpo", kl_coef=0.0), arm("dr_grpo", "dr_grpo", kl_coef=0.0)],
    seeds=[0],
    budget=Budget(max_steps=1, prompts_per_step=2, group_size=2, max_new_tokens=8),
    eval=EvalSpec(at_start=False, max_problems=3, n_samples=2, ks=(1,)),
    passk=None,
    tune=TuneSpec(params={"lr": log_range(1e-6, 1e-4)}, trials=2, steps=1, seeds=(5,)),
)
"""


def _save(run_dir: Path, step: int, model, engine_state=None) -> None:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda u: 1.0)
    save_checkpoint(
        run_dir,
        step=step,
        model=model,
        optimizer=optimizer,
        scheduler=scheduler,
        state={"step": step},
        engine_state=engine_state,
    )


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_the_newest_checkpoint_or_a_refusal_naming_the_file_never_the_previous(tmp_path):
    model = tiny_llama(seed=0)
    for step in (1, 2):
        _save(tmp_path, step, model, engine_state={"w": torch.full((2,), float(step))})
    bad = checkpoint_dirs(tmp_path)[0] / ENGINE
    _flip(bad)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda u: 1.0)

    with pytest.raises(CorruptCheckpoint, match=str(bad)) as caught:
        load_newest(tmp_path, model=model, optimizer=optimizer, scheduler=scheduler)

    assert "\n" not in str(caught.value)
    assert (
        load_newest(tmp_path / "none", model=model, optimizer=optimizer, scheduler=scheduler)
        is None
    )


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """The recipe study run once: (its study file, results folder, clean recipes.csv)."""
    if not zoo_model_built("hopeless"):
        pytest.skip("zoo model 'hopeless' not built (ablate zoo build ladder)")
    root = tmp_path_factory.mktemp("recipes")
    study = root / "stale.py"
    study.write_text(textwrap.dedent(RECIPES))
    results = root / "results"
    run_study(load_study(str(study)), results_dir=results)  # no report: the reruns are the CLI
    return study, results, (results / "stale" / "recipes.csv").read_bytes()


@pytest.fixture
def copy(ran, tmp_path):
    """A copy of the run's results to damage: (study file, results, trial folder, clean table)."""
    study, results, clean = ran
    shutil.copytree(results, tmp_path / "results")
    results = tmp_path / "results"
    (trial,) = (results / "stale" / "trials").iterdir()
    return study, results, trial, clean


def _rerun(study: Path, results: Path) -> int:
    return main(["run", str(study), "--results", str(results), "--out", str(results / "r")])


@pytest.mark.parametrize("name", [ENGINE, WEIGHTS])
def test_a_damaged_final_checkpoint_stops_the_recipe_phase_naming_it(copy, name, capsys):
    study, results, trial, _ = copy
    final = checkpoint_dirs(trial)[0]
    assert final.name == "step-000003" and (final / ENGINE).is_file()
    _flip(final / name)
    shutil.rmtree(results / "stale" / "recipes")  # the recipes to measure again
    (results / "stale" / "recipes.csv").unlink()
    capsys.readouterr()

    assert _rerun(study, results) == 2

    line = one_error(capsys)
    assert str(final / name) in line and "final checkpoint" in line
    assert "CheckpointWarning" not in line and "previous" not in line
    # nothing measured from the step-2 checkpoint in its place
    assert not (results / "stale" / "recipes.csv").exists()
    assert not list((results / "stale" / "recipes").rglob("*.json"))


def test_a_missing_final_checkpoint_is_refused_not_replaced_by_the_one_before(copy, capsys):
    study, results, trial, _ = copy
    final, previous = checkpoint_dirs(trial)
    shutil.rmtree(final)
    shutil.rmtree(results / "stale" / "recipes")
    capsys.readouterr()

    assert _rerun(study, results) == 2

    line = one_error(capsys)
    assert f"{previous} is not trial {trial.name}'s final checkpoint" in line
    assert "holds step 2" in line


def test_a_recipe_result_cut_short_is_measured_again_to_the_same_table(copy, capsys):
    study, results, _, clean = copy
    cut = sorted((results / "stale" / "recipes").rglob("*.json"))[1]
    cut.write_text(cut.read_text()[:20])

    capsys.readouterr()

    assert _rerun(study, results) == 0

    warned = [line for line in capsys.readouterr().err.splitlines() if str(cut) in line]
    assert len(warned) == 1 and warned[0].startswith("warning: ")
    assert "measured again" in warned[0]
    assert json.loads(cut.read_text())["rates"]
    assert (results / "stale" / "recipes.csv").read_bytes() == clean


def test_a_damaged_recipe_result_without_a_checkpoint_to_remeasure_is_one_line(copy, capsys):
    study, results, trial, _ = copy
    cut = sorted((results / "stale" / "recipes").rglob("*.json"))[0]
    cut.write_bytes(b"\xff\xfe\x00garbage")
    shutil.rmtree(trial / "checkpoints")  # trained on another machine
    capsys.readouterr()

    assert _rerun(study, results) == 2

    line = one_error(capsys)
    assert f"{cut} is damaged" in line and "final checkpoint" in line


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (bytes(range(256)) * 2, "not text"),
        (b"arm,number,score,state,chosen,lr\ngrpo,0,0.5,finished,True,nan\n", "lr=nan"),
        (b"arm,number,score,state,chosen,lr\ngrpo,0,0.5,finished,True,7\n", "lr=7 is outside"),
        (b"arm,numb", "no header"),
        (b"", "empty"),
    ],
    ids=["random-bytes", "nan", "out-of-range", "cut-short", "empty"],
)
def test_status_of_a_damaged_tuning_table_is_one_line_naming_it(tmp_path, capsys, text, reason):
    study = tmp_path / "fair.py"
    study.write_text(textwrap.dedent(TUNED))
    table = tmp_path / "results" / "fair" / "tuning.csv"
    table.parent.mkdir(parents=True)
    table.write_bytes(text)

    assert main(["status", str(study), "--results", str(tmp_path / "results")]) == 2

    line = one_error(capsys)
    assert f"{table} is damaged" in line and reason in line
    assert "--tune-only" in line  # what to do


@pytest.mark.parametrize("command", ["run", "status", "report"])
@pytest.mark.parametrize("shape", ["long-name", "long-path"])
def test_a_path_past_the_limits_is_one_line_with_exit_code_2(tmp_path, capsys, command, shape):
    study = tmp_path / "fair.py"
    study.write_text(textwrap.dedent(TUNED))
    if shape == "long-name":
        results, why = tmp_path / ("x" * 300), "a name of 300 bytes"
    else:
        results, why = tmp_path.joinpath(*["d" * 100] * 42), "for a path"

    assert main([command, str(study), "--results", str(results)]) == 2

    line = one_error(capsys)
    assert line.startswith("error: path too long (") and why in line
    assert str(tmp_path)[:40] in line  # the path, shortened to its two ends
