"""The records an RL step hands from stage to stage, at the bottom of the package.

How to sample (`SamplingParams`), what an engine returns (`Rollouts`), the same verified
(`ScoredBatch`), a trial's budget counters (`Counters`), the no-grad passes before the update
(`FrozenPass`, with the estimator head's `HeadReadout`), the batch shaped for the loss
(`ShapedBatch`), the estimator's output (`Estimate`, with its typed `ValueTargets`) and what the
update did (`UpdateResult`). Dataclasses over tensors, importing torch and the standard library
only: every stage, the held-out eval, the Pass@G sweep and the zoo read them without importing
the module that produced them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import torch
from torch import Tensor

from ablate.base.errors import ConfigError

#: What vLLM's `SamplingParams` refuses or silently changes (vllm/sampling_params.py,
#: `_verify_args`, `__post_init__`): a temperature above 2 is an error; a positive one below
#: 0.01 (`_MAX_TEMP`) is raised to 0.01 with a warning, so its log-probs would not be
#: log_softmax(logits / T) for the T asked; greedy decoding (T = 0) with n > 1 is an error.
VLLM_MAX_TEMPERATURE = 2.0
VLLM_MIN_TEMPERATURE = 0.01


def vllm_temperature_problems(temperature: float, what: str = "temperature") -> list[str]:
    """Why vLLM cannot sample at `temperature` as asked ([] when it can)."""
    if temperature > VLLM_MAX_TEMPERATURE:
        return [f"{what}={temperature} is above {VLLM_MAX_TEMPERATURE}, which vLLM refuses"]
    if 0 < temperature < VLLM_MIN_TEMPERATURE:
        return [
            f"{what}={temperature} is below {VLLM_MIN_TEMPERATURE}: vLLM would silently sample at "
            f"{VLLM_MIN_TEMPERATURE} instead; use 0 (greedy) or >= {VLLM_MIN_TEMPERATURE}"
        ]
    return []


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

    def vllm_problems(self, n: int) -> list[str]:
        """What vLLM would refuse (or silently change) in a request of `n` samples per prompt
        with these settings; the vLLM engine raises them as a ConfigError before sampling."""
        problems = vllm_temperature_problems(self.temperature)
        if self.greedy and n > 1:
            problems.append(f"greedy decoding (temperature 0) with n={n} > 1, which vLLM refuses")
        return problems

    @property
    def filters_distribution(self) -> bool:
        """True when top-p/top-k sample from a truncated distribution: the returned log-probs
        are then that renormalised distribution's, not log_softmax(logits / T) as the trainer
        computes, which is why training refuses top-p/top-k (`Budget`) and only evaluation
        may use them."""
        return self.top_p < 1 or self.top_k > 0


@dataclass
class Rollouts:
    """A batch of `num_samples = num_prompts * group_size` completions, groups contiguous."""

    prompt_ids: Tensor  # [B, P] long, left padded
    prompt_mask: Tensor  # [B, P] long
    completion_ids: Tensor  # [B, T] long, right padded with pad_id
    completion_mask: Tensor  # [B, T] float32, 1 on completion tokens (EOS included)
    logprobs: Tensor  # [B, T] float32, the sampled token's log-prob under the distribution it
    # was drawn from: log_softmax(logits / temperature), renormalised over the top-k/top-p set
    # when those filter (vLLM's "processed_logprobs"); without them, what the trainer computes
    entropy: Tensor | None  # [B, T] float32, entropy of the temperature-scaled distribution;
    # None where the engine does not report it (vLLM): then no `entropy/` metric is logged
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
            entropy=_cat_entropy(parts),
            lengths=torch.cat([p.lengths for p in parts]),
            truncated=torch.cat([p.truncated for p in parts]),
            group_ids=torch.cat([p.group_ids + off for p, off in zip(parts, offsets, strict=True)]),
            problem_ids=[x for p in parts for x in p.problem_ids],
            prompts=[x for p in parts for x in p.prompts],
            texts=[x for p in parts for x in p.texts],
            logprobs_exact=all(p.logprobs_exact for p in parts),
            pad_id=pad_id,
        )


def _cat_entropy(parts: Sequence[Rollouts]) -> Tensor | None:
    """Entropy of every part, or None when any part has none (a mean over part of a batch
    would silently describe other samples than the batch's)."""
    if any(p.entropy is None for p in parts):
        return None
    return _cat_padded([p.entropy for p in parts], 0, left=False)  # type: ignore[misc]


def _cat_padded(tensors: Sequence[Tensor], value: float, *, left: bool) -> Tensor:
    width = max(t.shape[1] for t in tensors)
    padded = []
    for t in tensors:
        extra = width - t.shape[1]
        pad = (extra, 0) if left else (0, extra)
        padded.append(torch.nn.functional.pad(t, pad, value=value) if extra else t)
    return torch.cat(padded)


@dataclass
class ScoredBatch:
    """Rollouts with their verdicts (`tasks.base.Verdict`, one per sample); `scores` [B] are the
    verifier's rewards, `correct` [B] bool its correctness."""

    rollouts: Rollouts
    verdicts: list[Any]
    scores: Tensor
    correct: Tensor
    gen_batches: int = 1
    generated: ScoredBatch | None = None
    """Every sample generated for this batch (all attempts, before dynamic sampling's or
    zero-variance filtering's filter); None when that is the batch itself."""
    metrics: dict[str, float] = field(default_factory=dict)
    """The data-side factors' step metrics (`data/…`, `reward/control_mean`, …)."""

    @property
    def all_samples(self) -> ScoredBatch:
        return self if self.generated is None else self.generated

    def select(self, keep: Tensor) -> ScoredBatch:
        idx = keep.nonzero().flatten()
        return ScoredBatch(
            rollouts=self.rollouts.select(idx),
            verdicts=[self.verdicts[i] for i in idx.tolist()],
            scores=self.scores[idx],
            correct=self.correct[idx],
        )

    @classmethod
    def concat(cls, parts: Sequence[ScoredBatch]) -> ScoredBatch:
        return cls(
            rollouts=Rollouts.concat([p.rollouts for p in parts]),
            verdicts=[v for p in parts for v in p.verdicts],
            scores=torch.cat([p.scores for p in parts]),
            correct=torch.cat([p.correct for p in parts]),
        )


@dataclass
class Counters:
    """Cumulative budget counters of a trial (all logged under budget/)."""

    generated_samples: int = 0
    generated_tokens: int = 0
    trained_tokens: int = 0
    gen_batches: int = 0
    extra_gen_batches: int = 0
    verifier_errors: int = 0

    def as_metrics(self) -> dict[str, float]:
        return {f"budget/{k}": float(v) for k, v in self.__dict__.items()}


@dataclass
class HeadReadout:
    """The estimator head's outputs [B, T] under the sampling policy (a no-grad pass), and the
    seconds of that pass when it ran only for the head (0 when it also gave the old log-probs)."""

    outputs: Tensor
    seconds: float = 0.0


@dataclass
class FrozenPass:
    """No-grad results of the policy before the updates (and of the reference model), and which
    forward passes produced them (what the step's compute accounting charges)."""

    old_logp: Tensor
    """[B, T] log-probs of the sampling policy (0 on padding)."""
    ref_logp: Tensor | None
    """[B, T] reference log-probs; None without a reference model."""
    readout: HeadReadout | None
    """The estimator head's outputs; None when it has no head."""
    policy_pass: bool
    """A no-grad policy forward ran (the engine's log-probs were not reusable, or a head read)."""
    reference_pass: bool
    """A no-grad forward of the reference model ran."""


@dataclass
class ShapedBatch:
    """One step's training batch: shapes [B] per sample, [B, T] per completion token."""

    rollouts: Rollouts
    outcome: Tensor
    """[B] verifier reward plus the overlong penalty: the reward of the whole completion."""
    kl_penalty: Tensor | None
    """[B, T] kl_coef · KL(π_old ‖ π_ref) per token when the KL is in the reward, else None."""
    rewards: Tensor
    """[B] outcome minus the summed KL penalty: what group-relative advantages are taken of."""
    loss_mask: Tensor
    """[B, T] the completion mask, less truncated completions under overlong filtering and the
    tokens a rollout correction rejected (geo_rs, k3_rs, m2po)."""
    old_logp: Tensor
    """[B, T] log-probs of the sampling policy (0 on padding)."""
    ref_logp: Tensor | None
    """[B, T] reference log-probs for a KL term in the loss; None when the KL is not there."""
    is_weights: Tensor | None = None
    """[B, T] rollout-correction weights on the policy loss; None when off."""
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass
class ValueTargets:
    """What a learned critic's loss compares its outputs with, per row of the step's batch: the
    values under the sampling policy and the GAE returns [B, T], and each row's prompt [B] (a
    prompt_mean value loss groups by it)."""

    old_values: Tensor
    returns: Tensor
    group_ids: Tensor

    def select(self, rows: Tensor, device: torch.device | str) -> ValueTargets:
        """The targets of a minibatch's `rows`, on the device of its forward."""
        return ValueTargets(
            **{f.name: getattr(self, f.name)[rows].to(device) for f in fields(self)}
        )


@dataclass
class Estimate:
    """Advantages [B] (one per sample) or [B, T] (one per token), the estimator's metrics, and
    the targets of its extra loss (None when it adds none)."""

    advantages: Tensor
    metrics: dict[str, float] = field(default_factory=dict)
    targets: ValueTargets | None = None


@dataclass
class UpdateResult:
    """What the update stage did to the policy (and the estimator's own modules)."""

    stats: list[dict[str, float]]
    """The loss statistics of each optimizer update, in order."""
    epochs: int
    """Forward + backward passes over the batch."""
    trained_tokens: int
    """Loss-mask tokens trained on, times the passes."""
    update_tokens: int
    """Non-padding tokens through forward + backward, over all passes (6 × params × this is
    the update's FLOP count)."""
    estimator_metrics: dict[str, float] = field(default_factory=dict)
    """The estimator's cost in this step (seconds, parameters)."""
