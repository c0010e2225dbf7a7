"""A train–inference mismatch you can dial on a CPU, from the two mechanisms that create it in
2026's RL frameworks: the engine samples with its weights and compute in bf16/fp16 while the
trainer learns in fp32 (what vLLM/SGLang rollouts do on GPUs), and/or from the policy k updates
old (what asynchronous trainers do). `MismatchedEngine` samples from its own copy of the
weights, k snapshots behind and cast to the rollout dtype; its log-probs are the sampler's, so
the trainer recomputes its own (`Rollouts.logprobs_exact` is False) and the rollout correction
sees both.

Its snapshots live in memory: a trial resumed from a checkpoint restarts its lag from the
resumed weights (the first k steps after a resume sample from them).
"""

from __future__ import annotations

import copy
import dataclasses
from collections import deque
from collections.abc import Sequence
from typing import Any

import torch

from ablate.base.errors import ConfigError
from ablate.base.records import Rollouts, SamplingParams
from ablate.rollout.hf import HFEngine

#: `Algorithm.rollout_precision` -> the engine copy's dtype ("trainer": the trainer's own)
ROLLOUT_DTYPES = {"trainer": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def check_rollout_dtype(precision: str, device: str) -> None:
    """ConfigError, before any compute, when this machine's torch cannot run a causal LM's
    kernels (matmul, softmax) in the rollout precision on `device`."""
    dtype = ROLLOUT_DTYPES[precision]
    if dtype is None:
        return
    try:
        x = torch.ones(2, 4, dtype=dtype, device=device)
        w = torch.ones(4, 4, dtype=dtype, device=device)
        torch.log_softmax(torch.nn.functional.silu(x @ w), dim=-1).sum().item()
    except (RuntimeError, TypeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(
            f"rollout_precision={precision!r}: this machine's torch has no {dtype} kernels on "
            f"{device} ({first}); use rollout_precision='trainer' or another precision"
        ) from None


class MismatchedEngine:
    """An `HFEngine` over a copy of the trainer's weights in `dtype` (None: the trainer's), that
    follows the trainer `staleness` updates behind."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        device: str | torch.device = "cpu",
        dtype: torch.dtype | None = None,
        staleness: int = 0,
    ) -> None:
        self.dtype, self.staleness = dtype, staleness
        self.sampler_model = copy.deepcopy(model).eval().requires_grad_(False)
        if dtype is not None:
            self.sampler_model.to(dtype)
        self.inner = HFEngine(self.sampler_model, tokenizer, device=device)
        self.pending: deque[dict[str, torch.Tensor]] = deque()

    def sync_weights(self, model: Any) -> None:
        """Queue the trainer's new weights; the sampler takes the oldest once k are queued, so
        the rollouts after update u come from the weights after update u − k."""
        self.pending.append({k: v.detach().clone() for k, v in model.state_dict().items()})
        if len(self.pending) > self.staleness:
            state = self.pending.popleft()
            with torch.no_grad():  # copy_ casts fp32 into the sampler's dtype
                for name, tensor in self.sampler_model.state_dict().items():
                    tensor.copy_(state[name])

    def generate(
        self,
        prompts: Sequence[str],
        n: int,
        sampling: SamplingParams,
        *,
        problem_ids: Sequence[str] | None = None,
    ) -> Rollouts:
        r = self.inner.generate(prompts, n, sampling, problem_ids=problem_ids)
        return dataclasses.replace(r, logprobs=r.logprobs.float(), logprobs_exact=False)
