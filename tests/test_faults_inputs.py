"""Fault suite, fast set for bad inputs and bad places: every output location refused before
compute, absurd sizes refused naming the field and its limit, each as the README promises (one
line, exit code 2, nothing written)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ablate.cli import main

STUDY = """
from ablate.study import Budget, EvalSpec, Study, arm

STUDY = Study(
    name="inputs",
    base_models=["hopeless"],
    arms=[arm("grpo", "grpo", kl_coef=0.0)],
    seeds=[0],
    budget=Budget(max_steps=2, prompts_per_step=2, group_size=2, max_new_tokens=8),
    eval=EvalSpec(max_problems=2, n_samples=2, ks=(1,)),
    passk=None,
)
"""


@pytest.fixture
def study_file(tmp_path) -> Path:
    path = tmp_path / "inputs.py"
    path.write_text(textwrap.dedent(STUDY))
    return path


def one_error(capsys) -> str:
    """The command's one error line (warnings aside); fails on a traceback or a second line."""
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if not line.startswith("warning: ")]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("command", ["run", "report"])
def test_an_out_that_is_a_file_is_one_line_before_anything_is_written(
    command, study_file, tmp_path, capsys
):
    results, out = tmp_path / "results", tmp_path / "taken"
    out.write_text("not a folder")
    argv = [command, str(study_file), "--results", str(results), "--out", str(out)]
    assert main(argv) == 2
    line = one_error(capsys)
    assert f"report folder {out.resolve() / 'inputs'} cannot be created" in line
    assert f"{out.resolve()} is a file" in line
    assert not results.exists() and out.read_text() == "not a folder"


@pytest.mark.parametrize("command", ["run", "report"])
def test_an_unwritable_out_is_one_line_naming_it(command, study_file, tmp_path, capsys):
    results = tmp_path / "results"
    argv = [command, str(study_file), "--results", str(results), "--out", "/proc/ablate-out"]
    assert main(argv) == 2  # /proc refuses new files even to root
    line = one_error(capsys)
    assert "report folder /proc/ablate-out/inputs cannot be created in /proc" in line
    assert "pass --out another" in line
    assert not results.exists()


def test_report_folder_of_the_study_being_a_file_is_refused(study_file, tmp_path, capsys):
    results, out = tmp_path / "results", tmp_path / "reports"
    out.mkdir()
    (out / "inputs").write_text("")
    assert main(["run", str(study_file), "--results", str(results), "--out", str(out)]) == 2
    assert one_error(capsys).endswith(f"{out.resolve() / 'inputs'} is a file: pass --out a folder")
    assert not results.exists()
