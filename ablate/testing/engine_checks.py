"""Checks of a rollout engine against the trainer, for any `RolloutEngine` on any device: the
vLLM lane's tests (`tests/vllm_lane/`, the real engine on the CPU) and `make gpu-check`'s vLLM part
run these same functions, so a GPU run checks what CI checks.

- `logprob_gap`: the log-prob contract (`Rollouts.logprobs`: each sampled token's log-prob is
  log_softmax(logits / T) of the trainer's forward at its position, over the top-k tokens when
  `top_k`), as the largest |engine - trainer| over the sampled tokens;
- `sync_gaps`: weight sync, as that gap after an update the engine was not told of and after
  `sync_weights` (a sync that is skipped or partial leaves the first gap);
- `stream_check`: the seed contract: distinct streams per sample, a seed that replays.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ablate.base.records import Rollouts, SamplingParams


def trainer_logprobs(model, rollouts: Rollouts, temperature: float, top_k: int = 0):
    """The trainer's log-prob [B, T] (float64, on the CPU) of each sampled token: log_softmax of
    its logits / T at its position, renormalised over the top-k tokens when `top_k`; 0 where
    the completion mask is."""
    device = next(model.parameters()).device
    prompt, completion = rollouts.prompt_ids, rollouts.completion_ids
    ids = torch.cat([prompt, completion], dim=1)
    attention = torch.cat([rollouts.prompt_mask, rollouts.completion_mask.long()], dim=1)
    positions = (attention.cumsum(-1) - 1).clamp(min=0)  # left padding: positions from 0
    with torch.no_grad():
        logits = model(
            input_ids=ids.to(device),
            attention_mask=attention.to(device),
            position_ids=positions.to(device),
        ).logits
    logits = logits[:, prompt.shape[1] - 1 : -1].double().cpu() / temperature
    if top_k:
        kth = logits.topk(top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    logp = torch.log_softmax(logits, dim=-1).gather(-1, completion[..., None])[..., 0]
    return logp * rollouts.completion_mask


def logprob_gap(model, rollouts: Rollouts, temperature: float, top_k: int = 0) -> float:
    """The largest |engine - trainer| log-prob over the sampled tokens of `rollouts`."""
    valid = rollouts.completion_mask > 0
    if not bool(valid.any()):
        raise ValueError("the rollouts hold no sampled token to check")
    trainer = trainer_logprobs(model, rollouts, temperature, top_k)
    return (trainer - rollouts.logprobs.double())[valid].abs().max().item()


def perturb_every_tensor(model, scale: float = 0.05, seed: int = 3) -> None:
    """Move every parameter of `model`, each by its own noise of `scale` times its mean size
    (as an update moves them all), so that a tensor a sync leaves out shows in the log-probs."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            noise = torch.randn(parameter.shape, generator=generator).to(parameter.device)
            parameter.add_(scale * noise * parameter.abs().mean().clamp(min=1e-3))


@dataclass(frozen=True)
class SyncGaps:
    """`logprob_gap` after an update: before the engine was synced, and after."""

    before_sync: float
    after_sync: float


def sync_gaps(engine, model, prompts: Sequence[str], sampling: SamplingParams) -> SyncGaps:
    """Perturb `model` (`perturb_every_tensor`), sample before and after `engine.sync_weights`."""
    perturb_every_tensor(model)
    before = logprob_gap(model, engine.generate(prompts, 4, sampling), sampling.temperature)
    engine.sync_weights(model)
    after = logprob_gap(model, engine.generate(prompts, 4, sampling), sampling.temperature)
    return SyncGaps(before, after)


@dataclass(frozen=True)
class Streams:
    """What `stream_check` saw: distinct completions of `samples`, and whether the same seed
    replayed them (ids and log-probs) and another seed did not."""

    distinct: int
    samples: int
    replays: bool
    other_seed_differs: bool


def stream_check(engine, prompts: Sequence[str], n: int, sampling: SamplingParams) -> Streams:
    """Sample `prompts` x `n` twice with `sampling`'s seed and once with the next seed. On a
    model with near-uniform next tokens (a random one), equal completions mean equal streams."""
    first = engine.generate(prompts, n, sampling)
    again = engine.generate(prompts, n, sampling)
    other = engine.generate(prompts, n, dataclasses.replace(sampling, seed=sampling.seed + 1))
    return Streams(
        distinct=len({tuple(row) for row in first.completion_ids.tolist()}),
        samples=first.num_samples,
        replays=torch.equal(first.completion_ids, again.completion_ids)
        and torch.equal(first.logprobs, again.logprobs),
        other_seed_differs=not torch.equal(first.completion_ids, other.completion_ids),
    )
