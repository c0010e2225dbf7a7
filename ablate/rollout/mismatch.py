"""A train–inference mismatch you can dial on a CPU, from the two mechanisms that create it in
2026's RL frameworks: the engine samples with its weights and compute in bf16/fp16 while the
trainer learns in fp32 (what vLLM/SGLang rollouts do on GPUs), and/or from the policy k updates
old (what asynchronous trainers do). `MismatchedEngine` samples from its own copy of the
weights, k snapshots behind and cast to the rollout dtype; its log-probs are the sampler's, so
the trainer recomputes its own (`Rollouts.logprobs_exact` is False) and the rollout correction
sees both.

Its sampler weights and its queue of the k newest trainer snapshots are trial state like the
optimizer's: `state()` returns them and `load_state()` puts them back, and the trial's checkpoint
(`ablate.stages.checkpoint`, file `engine.pt`) holds them, so a trial resumed after a kill
samples from exactly the weights the uninterrupted trial would have.
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
        self.pending.append(_cloned(model.state_dict()))
        if len(self.pending) > self.staleness:
            state = self.pending.popleft()
            with torch.no_grad():  # copy_ casts fp32 into the sampler's dtype
                for name, tensor in self.sampler_model.state_dict().items():
                    tensor.copy_(state[name])

    def state(self) -> dict[str, Any]:
        """A copy of what the engine carries from one update to the next: `sampler`, the
        sampler's weights (in its dtype), and `pending`, the trainer's queued snapshots, oldest
        first (at most `staleness`). Later syncs do not change the returned tensors."""
        return {
            "sampler": _cloned(self.sampler_model.state_dict()),
            "pending": [_cloned(snapshot) for snapshot in self.pending],
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Put back what `state()` returned (copied: the engine never aliases `state`). A
        ValueError when it does not fit: other weight names, or more snapshots than k."""
        sampler, pending = state["sampler"], state["pending"]
        own = self.sampler_model.state_dict()
        if set(sampler) != set(own) or any(set(s) != set(own) for s in pending):
            raise ValueError("the engine state holds weights of another model")
        if len(pending) > self.staleness:
            raise ValueError(
                f"the engine state queues {len(pending)} snapshots, more than the "
                f"staleness {self.staleness}"
            )
        with torch.no_grad():
            for name, tensor in own.items():
                tensor.copy_(sampler[name])
        self.pending = deque(_cloned(snapshot) for snapshot in pending)

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


def _cloned(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {name: tensor.detach().clone() for name, tensor in weights.items()}
