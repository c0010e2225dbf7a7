"""`VLLMEngine` on the CPU against a fake `vllm` (ablate.testing.vllm) that records what ablate
passes to vLLM: the `LLM(...)` arguments, each `SamplingParams`, the seeds, weight syncs and
shutdowns. Each test pins one of the fixes of issue 34 to the values vLLM's source needs; the
engine's memory is tested in test_vllm_memory.py, its log-probs in test_logprob_contract.py."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest
import torch

from ablate.base.errors import ConfigError
from ablate.base.records import Rollouts, SamplingParams
from ablate.factors.eval_spec import EvalSpec
from ablate.factors.spec import Budget, TrialSpec
from ablate.rollout import vllm as vllm_engine
from ablate.testing import char_tokenizer, tiny_llama
from ablate.testing.vllm import FakeVLLM

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def fake(fake_vllm):
    """The fake vllm installed (tests/conftest.py), the process's engine closed after."""
    return fake_vllm


@pytest.fixture
def model_and_tokenizer():
    tokenizer = char_tokenizer()
    return tiny_llama(seed=0, tokenizer=tokenizer), tokenizer


def test_llm_is_built_in_the_models_dtype_with_processed_logprobs(fake, model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    engine = vllm_engine.VLLMEngine(model, tokenizer, gpu_memory_utilization=0.25)
    (kwargs,) = fake.calls.llm_kwargs
    assert kwargs["dtype"] == "float32"  # vLLM's "auto" would run an fp32 config in 16 bits
    assert kwargs["logprobs_mode"] == "processed_logprobs"
    assert kwargs["gpu_memory_utilization"] == 0.25 and kwargs["enable_prefix_caching"] is False
    assert engine.attention_precision.startswith("fp32, IEEE")
    import os

    assert os.environ["TRITON_F32_DEFAULT"] == "ieee"


def test_a_bf16_model_is_served_in_bf16_without_the_fp32_attention_setting(fake):
    tokenizer = char_tokenizer()
    model = tiny_llama(seed=0, tokenizer=tokenizer).to(torch.bfloat16)
    engine = vllm_engine.VLLMEngine(model, tokenizer)
    assert fake.calls.llm_kwargs[0]["dtype"] == "bfloat16"
    assert engine.attention_precision == "bfloat16 inputs, fp32 accumulation"
    import os

    assert "TRITON_F32_DEFAULT" not in os.environ


def test_the_in_process_setting_is_set_not_defaulted(fake, model_and_tokenizer, monkeypatch):
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")  # a user's value is overridden
    vllm_engine.VLLMEngine(*model_and_tokenizer)
    import os

    assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"


def test_one_engine_per_process_reused_through_sync_weights_and_closed(fake, model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    first = vllm_engine.VLLMEngine(model, tokenizer)
    second = vllm_engine.VLLMEngine(tiny_llama(seed=1, tokenizer=tokenizer), tokenizer)
    assert len(fake.calls.llm_kwargs) == 1 and second.llm is first.llm
    # the reused engine receives the new trial's weights, every tensor of its state
    assert fake.calls.loaded_weights == [list(model.state_dict())]
    second.close()
    assert fake.calls.shutdowns == 1 and vllm_engine._SHARED is None
    vllm_engine.close()  # closing twice is harmless
    assert fake.calls.shutdowns == 1


def test_another_architecture_closes_the_old_engine_before_building(fake, model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    vllm_engine.VLLMEngine(model, tokenizer)
    vllm_engine.VLLMEngine(tiny_llama(seed=0, size="4.2M", tokenizer=tokenizer), tokenizer)
    assert len(fake.calls.llm_kwargs) == 2 and fake.calls.shutdowns == 1


def test_the_engine_is_closed_at_process_exit(fake, model_and_tokenizer, monkeypatch):
    registered = []
    monkeypatch.setattr(vllm_engine, "_EXIT_HOOK", False)
    monkeypatch.setattr(vllm_engine.atexit, "register", registered.append)
    vllm_engine.VLLMEngine(*model_and_tokenizer)
    vllm_engine.VLLMEngine(*model_and_tokenizer)
    assert registered == [vllm_engine.close]  # once per process


def test_an_8x8_batch_has_64_distinct_seeded_streams_one_request_per_sample(
    fake, model_and_tokenizer
):
    engine = vllm_engine.VLLMEngine(*model_and_tokenizer)
    prompts = [f"{i}+{i}=" for i in range(8)]
    sampling = SamplingParams(max_new_tokens=6, seed=3, ignore_eos=True)
    rollouts = engine.generate(prompts, 8, sampling)
    params = fake.calls.sampling
    assert len(params) == 64 and all(p.n == 1 for p in params)
    assert len(set(fake.calls.seeds)) == 64
    assert fake.calls.seeds == vllm_engine.sample_seeds(3, 64)
    # request b is prompt b // 8, in order; the samples are the requests' own
    encoded = engine.tokenizer(prompts)["input_ids"]
    assert fake.calls.prompts == [list(encoded[b // 8]) for b in range(64)]
    assert rollouts.num_samples == 64 and rollouts.group_size == 8
    rows = {tuple(r) for r in rollouts.completion_ids.tolist()}
    assert len(rows) == 64  # distinct streams, not copies


def test_seeds_are_distinct_for_any_request_size_and_step():
    for seed in (0, 1, 2**40):
        seeds = vllm_engine.sample_seeds(seed, 4096)
        assert len(set(seeds)) == 4096 and all(0 <= s < 2**31 for s in seeds)
    assert vllm_engine.sample_seeds(0, 8) != vllm_engine.sample_seeds(1, 8)
    # the old scheme: prompt seeds base + i, children + j -> (i, j) and (i+1, j-1) collide
    old = {(7 + i) + j for i in range(8) for j in range(8)}
    assert len(old) == 15


def test_sampling_params_passed_per_sample(fake, model_and_tokenizer):
    engine = vllm_engine.VLLMEngine(*model_and_tokenizer)
    sampling = SamplingParams(
        max_new_tokens=5, temperature=0.7, top_p=0.9, top_k=4, stop=("\n",), seed=1
    )
    engine.generate(["1+1="], 2, sampling)
    for p in fake.calls.sampling:
        assert p.kwargs["temperature"] == 0.7 and p.kwargs["top_p"] == 0.9
        assert p.kwargs["top_k"] == 4 and p.kwargs["max_tokens"] == 5
        assert p.kwargs["stop"] == ["\n"] and p.kwargs["logprobs"] == 0


def test_rollouts_carry_the_engines_logprobs_and_no_entropy(fake, model_and_tokenizer):
    from ablate.stages.forward import frozen_logprobs

    model, tokenizer = model_and_tokenizer
    engine = vllm_engine.VLLMEngine(model, tokenizer)
    r = engine.generate(["1+1=", "2+2="], 4, SamplingParams(max_new_tokens=6, seed=0))
    assert r.entropy is None and not r.logprobs_exact
    valid = r.completion_mask > 0
    # the fake samples the saved model as vLLM does: its log-probs are the trainer's, read per
    # position and masked after
    trainer = frozen_logprobs(model, r, 1.0)
    torch.testing.assert_close(r.logprobs[valid], trainer[valid], atol=1e-5, rtol=0)
    assert (r.logprobs[~valid] == 0).all()
    both = Rollouts.concat([r, r])
    assert both.entropy is None  # a batch with any engine's missing entropy has none


def test_entropy_absent_never_becomes_a_nan_metric():
    from ablate.stages.diagnostics import entropy_metrics

    mask = torch.ones(2, 3)
    assert entropy_metrics(None, mask) == {}
    assert entropy_metrics(torch.full((2, 3), 0.5), mask) == {"entropy/mean": 0.5}


@pytest.mark.parametrize(
    ("temperature", "n", "words"),
    [(2.5, 4, "above 2.0"), (0.005, 4, "below 0.01"), (0.0, 4, "greedy")],
)
def test_sampling_vllm_refuses_is_refused_first(fake, model_and_tokenizer, temperature, n, words):
    engine = vllm_engine.VLLMEngine(*model_and_tokenizer)
    sampling = SamplingParams(max_new_tokens=4, temperature=temperature)
    with pytest.raises(ConfigError, match=words):
        engine.generate(["1+1="], n, sampling)
    assert fake.calls.sampling == []  # nothing reached vLLM


def test_greedy_single_samples_and_the_bounds_are_accepted(fake, model_and_tokenizer):
    engine = vllm_engine.VLLMEngine(*model_and_tokenizer)
    for temperature, n in ((0.0, 1), (2.0, 2), (0.01, 2)):
        engine.generate(["1+1="], n, SamplingParams(max_new_tokens=3, temperature=temperature))
    assert len(fake.calls.sampling) == 5


def test_a_vllm_trial_with_a_temperature_vllm_refuses_fails_at_construction():
    from ablate.factors.presets import baseline

    with pytest.raises(ConfigError, match=r"budget\.temperature=3\.0"):
        TrialSpec(
            algorithm=baseline("grpo"),
            model="m",
            engine="vllm",
            budget=Budget(temperature=3.0),
        )
    with pytest.raises(ConfigError, match=r"eval\.temperature=0\.001"):
        TrialSpec(
            algorithm=baseline("grpo"), model="m", engine="vllm", eval=EvalSpec(temperature=0.001)
        )
    # the HF engine samples at any positive temperature
    TrialSpec(algorithm=baseline("grpo"), model="m", budget=Budget(temperature=3.0))


def test_a_prompt_longer_than_the_engines_context_is_a_config_error(fake, model_and_tokenizer):
    engine = vllm_engine.VLLMEngine(*model_and_tokenizer, max_model_len=8)
    with pytest.raises(ConfigError, match="max_model_len=8"):
        engine.generate(["12345+6789="], 2, SamplingParams(max_new_tokens=4))
    assert fake.calls.sampling == []


@pytest.mark.parametrize(
    ("version", "words"),
    [("0.19.0", r"older than 0\.19\.1"), ("0.20.0", "newer than"), ("0.33.0+cu130", "newer than")],
)
def test_a_vllm_outside_the_range_read_is_refused(monkeypatch, model_and_tokenizer, version, words):
    monkeypatch.setitem(sys.modules, "vllm", FakeVLLM(version=version))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(ConfigError, match=words) as info:
        vllm_engine.VLLMEngine(*model_and_tokenizer)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("version", ["0.19.1", "0.19.2+cu130"])
def test_a_vllm_in_the_range_read_is_accepted(fake_vllm, monkeypatch, model_and_tokenizer, version):
    monkeypatch.setattr(fake_vllm, "__version__", version)
    vllm_engine.VLLMEngine(*model_and_tokenizer)


def test_the_vllm_extra_is_the_range_the_engine_accepts():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (requirement,) = extras["optional-dependencies"]["vllm"]
    lower, upper = re.fullmatch(r"vllm>=([\d.]+),<([\d.]+)", requirement).groups()
    assert (lower, upper) == (vllm_engine.MIN_VLLM, vllm_engine.MAX_VLLM)


def test_the_fake_refuses_keywords_vllm_does_not_know(fake, tmp_path):
    """As vLLM's msgspec `SamplingParams` and `EngineArgs` do: a misspelt keyword is an error,
    never silently ignored."""
    with pytest.raises(TypeError, match="temprature"):
        fake.SamplingParams(temprature=0.5)
    with pytest.raises(TypeError, match="logprob_mode"):
        fake.LLM(str(tmp_path), logprob_mode="processed_logprobs")
    with pytest.raises(ValueError, match="logprobs_mode"):
        fake.LLM(str(tmp_path), logprobs_mode="processed")
    assert fake.SamplingParams(temperature=0.005).temperature == 0.01  # vLLM raises it silently


def test_the_zoo_tokenizer_round_trips_through_save_and_autotokenizer(tmp_path):
    """What vLLM does with the engine's folder: AutoTokenizer loads the saved tokenizer and
    encodes as ablate does (transformers 5 in this venv)."""
    import transformers
    from transformers import AutoTokenizer

    assert int(transformers.__version__.split(".")[0]) >= 5
    tokenizer = char_tokenizer()
    tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    text = "Q: 12 + 7 =\n"
    assert loaded(text)["input_ids"] == tokenizer(text)["input_ids"]
    assert loaded.eos_token_id == tokenizer.eos_token_id


def test_a_bf16_autocast_trial_samples_in_bf16_from_its_fp32_model(fake, model_and_tokenizer):
    from ablate.trial.setup import _default_engine

    model, tokenizer = model_and_tokenizer
    engine = _default_engine("vllm", "cuda", "bf16")(model, tokenizer)
    assert fake.calls.llm_kwargs[0]["dtype"] == "bfloat16" and engine.dtype == "bfloat16"
    assert _default_engine("vllm", "cuda", "fp32") is vllm_engine.VLLMEngine
    with pytest.raises(ConfigError, match="dtype='int8'"):
        vllm_engine.VLLMEngine(model, tokenizer, dtype="int8")
