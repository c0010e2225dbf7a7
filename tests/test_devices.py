"""ablate.base.devices on the CPU: device selection, the precision option's validation, the
deterministic settings CUDA gets, and the trainer's use of them. The CUDA numbers themselves
(fast_llama and the packed update against the CPU path) are tests/test_cuda_parity.py's."""

from __future__ import annotations

import os
import warnings

import pytest
import torch

from ablate.base import devices
from ablate.base.errors import ConfigError
from ablate.baselines import baseline
from ablate.factors.eval_spec import EvalSpec
from ablate.factors.spec import Budget, TrialSpec


def spec(**kw) -> TrialSpec:
    return TrialSpec(algorithm=baseline("grpo"), model="m", **kw)


@pytest.mark.parametrize(
    ("device", "precision", "problem"),
    [
        ("gpu", "fp32", "device='gpu'"),
        ("cuda:x", "fp32", "device='cuda:x'"),
        ("cpu", "fp16", "precision='fp16'"),
        ("cpu", "bf16", "a GPU option"),
    ],
)
def test_bad_device_or_precision_is_refused_at_construction(device, precision, problem):
    with pytest.raises(ConfigError, match=problem):
        spec(device=device, precision=precision)


@pytest.mark.parametrize(
    ("device", "precision"), [("cpu", "fp32"), ("auto", "bf16"), ("cuda:1", "bf16")]
)
def test_valid_device_and_precision_pairs_are_accepted(device, precision):
    assert devices.device_problems(device, precision) == []
    spec(device=device, precision=precision)


def test_the_default_precision_keeps_trial_ids():
    # a new field at its default is not hashed: every existing trial id stays valid
    assert spec().id == spec(precision="fp32").id != spec(device="auto", precision="bf16").id


def test_auto_resolves_to_cuda_only_when_torch_sees_a_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert devices.resolve_device("auto") == "cpu"
    with pytest.raises(ConfigError, match="sees no CUDA GPU"):
        devices.resolve_device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert devices.resolve_device("auto") == "cuda"
    assert devices.resolve_device("cuda:1") == "cuda:1"
    assert devices.resolve_device("cpu") == "cpu"


def test_bf16_needs_the_resolved_device_to_be_cuda():
    assert devices.resolve_precision("cuda", "bf16") == "bf16"
    with pytest.raises(ConfigError, match="needs a CUDA device"):
        devices.resolve_precision("cpu", "bf16")


def test_determinism_on_the_cpu_changes_nothing():
    before = torch.are_deterministic_algorithms_enabled()
    assert devices.configure_determinism("cpu") == {}
    assert torch.are_deterministic_algorithms_enabled() == before


def test_determinism_on_cuda_sets_every_switch_in_one_place(monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    saved = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        matmul.fp32_precision,
        cudnn.conv.fp32_precision,
        cudnn.benchmark,
        cudnn.deterministic,
    )
    cudnn.benchmark, cudnn.deterministic = True, False
    try:
        record = devices.configure_determinism("cuda")
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.is_deterministic_algorithms_warn_only_enabled()
        assert cudnn.deterministic and not cudnn.benchmark
        assert matmul.fp32_precision == "ieee" and cudnn.conv.fp32_precision == "ieee"
        assert record["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8" and record["tf32"] == "off"
    finally:
        torch.use_deterministic_algorithms(saved[0], warn_only=saved[1])
        matmul.fp32_precision, cudnn.conv.fp32_precision = saved[2], saved[3]
        cudnn.benchmark, cudnn.deterministic = saved[4], saved[5]


def test_autocast_is_bf16_on_cuda_and_nothing_in_fp32():
    with devices.autocast("cpu", "fp32"):
        assert not torch.is_autocast_enabled("cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "CUDA is not available": the context is still bf16
        context = devices.autocast("cuda", "bf16")
    assert isinstance(context, torch.autocast)
    assert context.fast_dtype == torch.bfloat16 and context.device == "cuda"


def test_the_trainer_resolves_auto_and_logs_the_precision(monkeypatch):
    from ablate.testing import ScriptedEngine, char_tokenizer, cycle_script, tiny_llama
    from ablate.tracking import MemoryTracker
    from ablate.trial import train
    from ablate.trial.setup import setup_trial

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    tokenizer = char_tokenizer()
    trial = spec(
        device="auto",
        budget=Budget(max_steps=1, prompts_per_step=2, group_size=2, max_new_tokens=4),
        eval=EvalSpec(at_start=False, max_problems=2, n_samples=2, ks=(1,)),
    )
    loaded = (tiny_llama(tokenizer=tokenizer), tokenizer)
    engine = lambda m, t: ScriptedEngine(cycle_script(["1"]), tokenizer=t)  # noqa: E731
    s = setup_trial(trial, loaded=loaded, engine=engine)
    assert s.device == "cpu" and s.precision == "fp32" and s.determinism == {}
    assert next(s.model.parameters()).device.type == "cpu"
    tracker = MemoryTracker()
    train(trial, tracker=tracker, loaded=loaded, engine=engine)
    assert tracker.params["precision"] == "fp32" and tracker.params["device"] == "auto"


def test_bf16_on_a_machine_without_cuda_fails_before_any_model_is_loaded(monkeypatch):
    from ablate.trial.setup import setup_trial

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)

    def no_load(*_):
        raise AssertionError("loaded a model")

    monkeypatch.setattr("ablate.models.load_model", no_load)
    with pytest.raises(ConfigError, match="needs a CUDA device"):
        setup_trial(spec(device="auto", precision="bf16"))


def test_the_memory_check_reads_auto_as_the_device_the_trial_will_use(monkeypatch):
    from ablate.study.resources import memory_limit

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert memory_limit("auto") == memory_limit("cpu")
    assert memory_limit("auto")[1] == "this machine's RAM"
