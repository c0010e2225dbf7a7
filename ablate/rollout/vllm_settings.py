"""What ablate's vLLM engine (`ablate.rollout.vllm`) passes to vLLM, without importing vLLM: the
version range whose source was read, the `LLM(...)` arguments, the dtype, the per-sample seeds.

The range is `vllm>=0.19.1,<0.20` (pyproject's `vllm` extra, checked again at engine start):
0.19.1 is the first release that loads tokenizers with transformers 5 (vllm-project/vllm
PR #30566), and every name the engine relies on below was read in 0.19.x's source; a later
minor release is refused until someone reads it (README, "GPU")."""

from __future__ import annotations

from typing import Any

import torch
from packaging.version import InvalidVersion, Version  # a dependency of transformers

from ablate.base.errors import ConfigError
from ablate.base.seeding import derive_seed

#: The vLLM releases the engine was checked against: [MIN_VLLM, MAX_VLLM).
MIN_VLLM = "0.19.1"
MAX_VLLM = "0.20"
#: Set (not defaulted) before the engine is built: the in-process engine core.
IN_PROCESS_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
#: fp32 attention in IEEE fp32: Triton's default for fp32 `tl.dot` is TF32 (10-bit mantissa).
FP32_ATTENTION_ENV = {"TRITON_F32_DEFAULT": "ieee"}
#: The log-probs of the distribution each token was sampled from: after temperature, top-k and
#: top-p (vllm/v1/sample/sampler.py, ops/topk_topp_sampler.py `forward_native`); the default
#: "raw_logprobs" is the log-softmax of the logits before any of them.
LOGPROBS_MODE = "processed_logprobs"
#: Seeds stay below 2**31: every seed vLLM has accepted across versions fits an int32.
SEED_SPACE = 2**31
DTYPES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}


def engine_dtype(model) -> str:
    """vLLM's `dtype` for `model`: its parameters' (fp32 stays fp32)."""
    dtype = next(model.parameters()).dtype
    if dtype not in DTYPES:
        raise ConfigError(f"the vllm engine runs float32, bfloat16 or float16 models, not {dtype}")
    return DTYPES[dtype]


def attention_precision(dtype: str) -> str:
    """The precision vLLM's attention computes in for a model of `dtype` (stated in reports)."""
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


def llm_arguments(
    folder: str, dtype: str, gpu_memory_utilization: float, max_model_len: int | None
) -> dict[str, Any]:
    """The keyword arguments of `vllm.LLM(...)`."""
    return {
        "model": folder,
        "dtype": dtype,
        "logprobs_mode": LOGPROBS_MODE,
        "gpu_memory_utilization": gpu_memory_utilization,
        "max_model_len": max_model_len,
        "enforce_eager": True,  # tiny models: CUDA-graph capture costs more than it saves
        "enable_prefix_caching": False,  # weights change every step; stale prefixes would lie
    }


def version_problem(found: str) -> str | None:
    """Why vLLM `found` cannot serve ablate's engine (None when it is in the range read)."""
    try:
        version = Version(found)
    except InvalidVersion:
        version = None
    if version is None or version < Version(MIN_VLLM):
        return (
            f"vLLM {found or '?'} is older than {MIN_VLLM}, the first release that loads "
            "tokenizers with transformers 5: pip install 'ablate[vllm]'"
        )
    if version.release[:2] >= Version(MAX_VLLM).release[:2]:
        return (
            f"vLLM {found} is newer than the range ablate's engine was checked against "
            f"(>={MIN_VLLM},<{MAX_VLLM}; README, GPU): pip install 'ablate[vllm]'"
        )
    return None
