"""Where a trial's models run and in what precision, and the deterministic settings CUDA allows:
all in this one module, so a trial on a GPU is set up one way wherever it starts.

- device: "cpu", "cuda", "cuda:N", or "auto" (CUDA when torch sees a GPU, else the CPU); the
  policy, the reference model and the critic all go there (`ablate.trial.setup`).
- precision: "fp32" (default: weights, activations and the loss in fp32), or "bf16": weights
  stay fp32, the forward passes run under `torch.autocast(dtype=bfloat16)` (sampling, frozen
  passes and updates alike, so old and new log-probs share their precision). A GPU option.
- determinism on CUDA: deterministic algorithms where an op has one (`warn_only`: an op without
  one warns rather than stops the trial), cuBLAS's fixed workspace, cuDNN without autotuning,
  and no TF32 in fp32 matmuls (PyTorch's fp32 default on Ampere+ may otherwise be TF32).
torch is reached lazily: specs validate these fields without importing it.
"""

from __future__ import annotations

import contextlib
import os
import re

from ablate.base.errors import ConfigError
from ablate.base.lazy import torch

PRECISIONS = ("fp32", "bf16")
_DEVICE = re.compile(r"cpu|auto|cuda(:\d+)?")
#: cuBLAS's deterministic workspace (CUDA docs, "Results reproducibility"); read when cuBLAS
#: first initialises in the process, so it is set before any model reaches the GPU.
CUBLAS_WORKSPACE = {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}


def device_problems(device: str, precision: str) -> list[str]:
    """What is wrong with a trial's device and precision fields ([] when nothing)."""
    problems = []
    if not isinstance(device, str) or not _DEVICE.fullmatch(device):
        problems.append(f"device={device!r} must be 'cpu', 'cuda', 'cuda:N' or 'auto'")
    if precision not in PRECISIONS:
        problems.append(f"precision={precision!r} must be one of {PRECISIONS}")
    elif precision == "bf16" and device == "cpu":
        problems.append("precision='bf16' (autocast) is a GPU option: use device='cuda' or 'auto'")
    return problems


def resolve_device(device: str) -> str:
    """The torch device a trial runs on: "auto" picks CUDA when torch sees a GPU; "cuda" on a
    machine without one is a ConfigError (raised before any compute)."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device={device!r} but torch sees no CUDA GPU on this machine")
    return device


def resolve_precision(device: str, precision: str) -> str:
    """The precision a trial runs in on the resolved `device`: bf16 needs CUDA there."""
    if precision == "bf16" and not device.startswith("cuda"):
        raise ConfigError(f"precision='bf16' needs a CUDA device; this trial runs on {device}")
    return precision


def configure_determinism(device: str) -> dict[str, str]:
    """Deterministic settings for `device`; what was set, for the record ({} on the CPU, whose
    kernels are deterministic for the ops ablate uses)."""
    if not device.startswith("cuda"):
        return {}
    os.environ.update(CUBLAS_WORKSPACE)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    _no_tf32()
    return {
        **CUBLAS_WORKSPACE,
        "deterministic_algorithms": "on (warn_only)",
        "cudnn": "deterministic, no benchmark",
        "tf32": "off",
    }


def _no_tf32() -> None:
    """IEEE fp32 matmuls and convolutions; through `fp32_precision` where torch has it (2.9+:
    mixing it with the legacy `allow_tf32` flags is an error there)."""
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    if hasattr(matmul, "fp32_precision"):
        matmul.fp32_precision = "ieee"
        cudnn.conv.fp32_precision = "ieee"
    else:
        matmul.allow_tf32 = False
        cudnn.allow_tf32 = False


def autocast(device: str, precision: str) -> contextlib.AbstractContextManager:
    """The context a trial's forward passes run in: bf16 autocast on CUDA, else nothing."""
    if precision == "bf16":
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()
