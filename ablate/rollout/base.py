"""What every rollout engine returns (`Rollouts`), how it is asked (`SamplingParams`), and the
`RolloutEngine` protocol the trainer and the pass@k sweep code against."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor

from ablate.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class SamplingParams:
    """How to sample completions. `temperature=0` means greedy decoding."""

    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    stop: tuple[str, ...] = ()
    seed: int = 0
    ignore_eos: bool = False  # keep sampling after EOS (benchmarks: a fixed number of tokens)

    def __post_init__(self) -> None:
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise ConfigError(
                f"max_new_tokens must be an integer >= 1, got {self.max_new_tokens!r}"
            )
        if not math.isfinite(self.temperature) or self.temperature < 0:
            raise ConfigError(f"temperature must be >= 0 (0 = greedy), got {self.temperature!r}")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1] (1 = off), got {self.top_p!r}")
        if not isinstance(self.top_k, int) or self.top_k < 0:
            raise ConfigError(f"top_k must be an integer >= 0 (0 = off), got {self.top_k!r}")
        if isinstance(self.stop, str) or any(not isinstance(s, str) or not s for s in self.stop):
            raise ConfigError(f"stop must be a tuple of non-empty strings, got {self.stop!r}")
        object.__setattr__(self, "stop", tuple(self.stop))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def filters_distribution(self) -> bool:
        """True when top-p/top-k sample from a truncated distribution (the returned log-probs,
        taken under the full distribution, then differ from the sampling distribution)."""
        return self.top_p < 1 or self.top_k > 0


@dataclass
class Rollouts:
    """A batch of `num_samples = num_prompts * group_size` completions, groups contiguous."""

    prompt_ids: Tensor  # [B, P] long, left padded
    prompt_mask: Tensor  # [B, P] long
    completion_ids: Tensor  # [B, T] long, right padded with pad_id
    completion_mask: Tensor  # [B, T] float32, 1 on completion tokens (EOS included)
    logprobs: Tensor  # [B, T] float32, log_softmax(logits / temperature) at the sampled token
    entropy: Tensor  # [B, T] float32, entropy of the temperature-scaled distribution
    lengths: Tensor  # [B] long
    truncated: Tensor  # [B] bool, max_new_tokens reached without EOS or stop string
    group_ids: Tensor  # [B] long, index of the prompt
    problem_ids: list[str]
    prompts: list[str]
    texts: list[str]  # decoded completion: EOS and padding removed, stop string kept
    logprobs_exact: bool  # logprobs equal the trainer's forward pass (reusable as old log-probs)
    pad_id: int = 0

    @property
    def num_samples(self) -> int:
        return int(self.completion_ids.shape[0])

    @property
    def group_size(self) -> int:
        """Samples per prompt; raises ValueError when groups have unequal sizes."""
        if self.num_samples == 0:
            return 0
        counts = torch.unique_consecutive(self.group_ids, return_counts=True)[1]
        if not bool((counts == counts[0]).all()):
            raise ValueError(f"groups have unequal sizes: {counts.tolist()}")
        return int(counts[0])

    def select(self, index: Tensor | Sequence[int]) -> Rollouts:
        """The subset of samples at `index` (bool mask or integer indices), in that order."""
        index = torch.as_tensor(index)
        if index.dtype == torch.bool:
            index = index.nonzero().flatten()
        index_list = index.tolist()
        values = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Tensor):
                values[f.name] = value[index]
            elif isinstance(value, list):
                values[f.name] = [value[i] for i in index_list]
            else:
                values[f.name] = value
        return Rollouts(**values)

    @classmethod
    def concat(cls, parts: Sequence[Rollouts]) -> Rollouts:
        """Stack batches: prompts re-left-padded, completions re-right-padded, group ids offset
        so groups from different batches stay distinct."""
        if not parts:
            raise ValueError("Rollouts.concat needs at least one batch")
        pad_id = parts[0].pad_id
        offsets, next_group = [], 0
        for part in parts:
            offsets.append(next_group)
            if part.num_samples:
                next_group += int(part.group_ids.max()) + 1
        return cls(
            prompt_ids=_cat_padded([p.prompt_ids for p in parts], pad_id, left=True),
            prompt_mask=_cat_padded([p.prompt_mask for p in parts], 0, left=True),
            completion_ids=_cat_padded([p.completion_ids for p in parts], pad_id, left=False),
            completion_mask=_cat_padded([p.completion_mask for p in parts], 0, left=False),
            logprobs=_cat_padded([p.logprobs for p in parts], 0, left=False),
            entropy=_cat_padded([p.entropy for p in parts], 0, left=False),
            lengths=torch.cat([p.lengths for p in parts]),
            truncated=torch.cat([p.truncated for p in parts]),
            group_ids=torch.cat([p.group_ids + off for p, off in zip(parts, offsets, strict=True)]),
            problem_ids=[x for p in parts for x in p.problem_ids],
            prompts=[x for p in parts for x in p.prompts],
            texts=[x for p in parts for x in p.texts],
            logprobs_exact=all(p.logprobs_exact for p in parts),
            pad_id=pad_id,
        )


def _cat_padded(tensors: Sequence[Tensor], value: float, *, left: bool) -> Tensor:
    width = max(t.shape[1] for t in tensors)
    padded = []
    for t in tensors:
        extra = width - t.shape[1]
        pad = (extra, 0) if left else (0, extra)
        padded.append(torch.nn.functional.pad(t, pad, value=value) if extra else t)
    return torch.cat(padded)


@runtime_checkable
class RolloutEngine(Protocol):
    """Samples `n` completions for each prompt; sample b belongs to prompt b // n."""

    def generate(
        self,
        prompts: Sequence[str],
        n: int,
        sampling: SamplingParams,
        *,
        problem_ids: Sequence[str] | None = None,
    ) -> Rollouts: ...

    def sync_weights(self, model: Any) -> None:
        """Make later samples come from `model`'s current weights (the trainer calls it after
        every update; a no-op for engines that sample from the training model itself)."""
        ...


def checked_request(
    prompts: Sequence[str], n: int, problem_ids: Sequence[str] | None
) -> tuple[list[str], list[str]]:
    """A `generate` call's arguments checked, as every engine needs them: (prompts, their
    problem ids). Raises ConfigError on a bad group size or a problem-id count mismatch."""
    check_group_size(n)
    prompts = list(prompts)
    return prompts, resolve_problem_ids(prompts, problem_ids)


def resolve_problem_ids(prompts: Sequence[str], problem_ids: Sequence[str] | None) -> list[str]:
    """Problem ids per prompt (defaulting to the prompt's index); raises on a length mismatch."""
    if problem_ids is None:
        return [str(i) for i in range(len(prompts))]
    if len(problem_ids) != len(prompts):
        raise ConfigError(f"got {len(problem_ids)} problem_ids for {len(prompts)} prompts")
    return [str(p) for p in problem_ids]


def check_group_size(n: int) -> None:
    if not isinstance(n, int) or n < 1:
        raise ConfigError(f"n (samples per prompt) must be an integer >= 1, got {n!r}")
