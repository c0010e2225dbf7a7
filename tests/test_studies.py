"""The shipped studies load and validate; the GPU template refuses missing local paths."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from ablate.base.errors import StudyError, StudyWarning
from ablate.factors.confounds import differing_fields
from ablate.study import load_study

STUDIES = Path(__file__).resolve().parents[1] / "studies"
CPU_STUDIES = [
    "quickstart",
    "base_model_selection",
    "factor_grid",
    "seed_claims",
    "aa_check",
    "reward_controls",
]


@pytest.mark.parametrize("name", CPU_STUDIES)
def test_cpu_studies_load_and_expand(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("error", StudyWarning)  # no undeclared confound in a shipped study
        study = load_study(STUDIES / f"{name}.py")
    trials = study.trials()
    assert trials and len({t.id for t in trials}) == len(trials)
    assert {t.spec.budget for t in trials} == {study.budget}  # one matched budget per study


def test_quickstart_matches_its_brief():
    study = load_study(STUDIES / "quickstart.py")
    trials = [t for t in study.trials() if t.spec.model == "rl_ready"]
    seeds = {a: {t.spec.seed for t in trials if t.arm == a} for a in {t.arm for t in trials}}
    presets = {"grpo", "dr_grpo", "dapo", "gspo"}
    assert set(seeds) == presets | {"grpo_again", "grpo_random", "grpo_noisy"}
    # >= 3 seeds per compared arm: the fewest for which the report gives intervals and tests
    assert all(seeds[a] >= {0, 1, 2} for a in presets)
    # live controls on the contrasts' own seeds (a control certifies the design it runs in): an
    # A/A pair on >= 5 shared seeds, a positive and a graded control with declared effects
    assert study.arm("grpo_again").replicate_of == "grpo"
    assert len(seeds["grpo_again"] & seeds["grpo"]) >= 5
    assert study.positive_control == "grpo_random" and study.graded_control == "grpo_noisy"
    assert study.control_effects == {"grpo_random": -0.25, "grpo_noisy": -0.07}
    assert study.arm("grpo_random").algorithm.reward_control == "random"
    assert study.arm("grpo_random").algorithm.reward_control_p == 0.5
    noisy = study.arm("grpo_noisy").algorithm
    assert (noisy.reward_control, noisy.reward_noise_fraction) == ("noisy", 0.5)
    # 3 seeds did not detect random rewards (12-03); simulated, 5 do in >= 90% of re-runs
    assert all(seeds[c] == seeds["dr_grpo"] == set(range(5)) for c in ("grpo_random", "grpo_noisy"))
    algos = [study.arm(a).algorithm for a in sorted(seeds)]
    assert {(a.ppo_epochs, a.minibatches, a.kl_coef) for a in algos} == {(1, 4, 0.0)}
    assert study.eval.every_tokens > 0 and study.effect_of_interest and study.equivalence_margin
    assert study.eval.max_problems is None  # the whole eval split: the task-level reading
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


def test_factor_grid_runs_the_2025_presets_as_whole_recipes():
    import ablate

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        study = load_study(STUDIES / "factor_grid.py")
    names = {a.name for a in study.arms}
    new = {"cispo", "sapo", "gmpo", "clip_cov", "kl_cov", "rloo", "reinforce_pp", "lite_ppo"}
    new.add("scalerl")
    assert new <= names
    for name in new:
        preset, algo = ablate.baseline(name), study.arm(name).algorithm
        assert set(preset.diff(algo)) <= {"minibatches", "kl_coef"}, name  # only the schedule


def test_factor_grid_path_runs_every_step_on_the_reference_schedule():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        study = load_study(STUDIES / "factor_grid.py")
    ref = study.arm(study.reference_arm).algorithm
    for a in study.arms:
        diff = differing_fields(a.algorithm, ref)
        assert not {"minibatches", "ppo_epochs", "kl_coef"} & set(diff) or a.name.endswith(
            "kl_coef=0.04]"
        ), a.name
    path_arms = [a.name for a in study.arms if a.name.startswith("grpo4+") or a.name == "dapo4"]
    assert path_arms[-1] == "dapo4" and len(path_arms) == 4
    assert "grpo4+clip_high" in path_arms  # clip-higher alone, where the ratio can move


def test_gpu_template_arms_share_one_schedule(monkeypatch, tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    data = tmp_path / "math.jsonl"
    data.write_text('{"problem": "1+1", "solution": "\\\\boxed{2}"}\n')
    monkeypatch.setenv("ABLATE_QWEN_MATH", str(tmp_path / "model"))
    monkeypatch.setenv("ABLATE_MATH_DATA", str(data))
    with warnings.catch_warnings():
        warnings.simplefilter("error", StudyWarning)
        try:
            study = load_study(STUDIES / "qwen_math_gpu.py")
        except StudyError as exc:  # a loader that wants more of the files: check the source
            pytest.skip(f"GPU template needs real files: {exc}")
    assert {a.algorithm.updates_per_rollout for a in study.arms} == {4}
    assert {a.algorithm.kl_coef for a in study.arms} == {0.0}


def test_the_vllm_studies_load_and_differ_from_their_hf_twins_only_by_the_engine():
    aa = load_study(STUDIES / "engine_aa.py")
    engines = {t.arm: t.spec.engine for t in aa.trials()}
    assert engines == {"grpo_hf": "hf", "grpo_vllm": "vllm"}
    assert aa.arm("grpo_hf").algorithm == aa.arm("grpo_vllm").algorithm
    assert aa.equivalence_margin == 0.03 and len(aa.seeds) >= 5
    quick = load_study(STUDIES / "vllm_quickstart.py")
    assert quick.engines == {"vllm"} and len(quick.seeds) == 2 and len(quick.arms) == 2
    row = load_study(STUDIES / "offpolicy_vllm.py")
    full = load_study(STUDIES / "offpolicy.py")
    by_name = {a.name: a for a in full.arms}
    for a in row.arms:  # the vLLM row is the no-mismatch row's algorithms on the other engine
        assert a == by_name[a.name]
        if a.name.startswith("vllm_"):
            twin = by_name["none_" + a.name.removeprefix("vllm_")]
            assert (a.engine, a.algorithm) == ("vllm", twin.algorithm)
    assert len(row.arms) == 10 and row.reference_arm == "none_plain"
