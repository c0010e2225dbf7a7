"""The shipped studies load and validate; the GPU template refuses missing local paths."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from ablate.errors import StudyError
from ablate.study import load_study

STUDIES = Path(__file__).resolve().parents[1] / "studies"
CPU_STUDIES = ["quickstart", "base_model_selection", "factor_grid", "seed_claims"]


@pytest.mark.parametrize("name", CPU_STUDIES)
def test_cpu_studies_load_and_expand(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        study = load_study(STUDIES / f"{name}.py")
    trials = study.trials()
    assert trials and len({t.id for t in trials}) == len(trials)
    assert {t.spec.budget for t in trials} == {study.budget}  # one matched budget per study


def test_quickstart_matches_its_brief():
    study = load_study(STUDIES / "quickstart.py")
    arms = {t.arm for t in study.trials() if t.spec.model == "rl_ready"}
    assert arms == {"grpo", "dr_grpo", "dapo", "gspo"}
    assert {t.spec.seed for t in study.trials() if t.spec.model == "rl_ready"} == {0, 1}
    assert {t.spec.model for t in study.trials()} == {"hopeless", "mid", "rl_ready", "saturated"}
    assert len(study.passk.templates) == 2


def test_gpu_template_refuses_missing_paths(monkeypatch, tmp_path):
    monkeypatch.setenv("ABLATE_QWEN_MATH", str(tmp_path / "no-model"))
    monkeypatch.setenv("ABLATE_MATH_DATA", str(tmp_path / "no-data.jsonl"))
    with pytest.raises(StudyError) as err:
        load_study(STUDIES / "qwen_math_gpu.py")
    assert "no-model" in str(err.value) and "no-data.jsonl" in str(err.value)


def test_factor_grid_includes_the_ppo_reference_row():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        study = load_study(STUDIES / "factor_grid.py")
    ppo = study.arm("ppo").algorithm
    assert ppo.advantage == "gae" and any(t.arm == "ppo" for t in study.trials())
