"""Log-probabilities under the policy, rewards → advantages, and the `ppo_epochs` × `minibatches`
optimizer updates of one RL step."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from ablate.algorithms import Algorithm
from ablate.batch import ScoredBatch
from ablate.errors import DivergedError
from ablate.objective import KL_ESTIMATORS, group_advantages, masked_sum, policy_loss
from ablate.rollout.base import Rollouts
from ablate.seeding import generator
from ablate.shaping import mask_truncated, soft_overlong_penalty
from ablate.trial import Budget, Optim


def completion_logprobs(
    model: torch.nn.Module, ids: Tensor, attn: Tensor, prompt_len: int, temperature: float
) -> tuple[Tensor, Tensor]:
    """Per-token log-probs [B, T] of the completion tokens under log_softmax(logits / temperature)
    and the entropy [B, T] of that distribution. `ids`/`attn`: prompt (left padded) + completion
    (right padded); positions count only attended tokens, as in the sampler."""
    positions = (attn.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=ids, attention_mask=attn, position_ids=positions).logits
    logits = logits[:, prompt_len - 1 : -1].float() / temperature  # [B, T, V]
    logps = torch.log_softmax(logits, dim=-1)
    targets = ids[:, prompt_len:]
    logp = logps.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    entropy = -(logps.exp() * logps).sum(-1)
    return logp, entropy


def model_inputs(rollouts: Rollouts, device: torch.device | str = "cpu") -> tuple[Tensor, Tensor]:
    ids = torch.cat([rollouts.prompt_ids, rollouts.completion_ids], dim=1)
    attn = torch.cat([rollouts.prompt_mask.long(), rollouts.completion_mask.long()], dim=1)
    return ids.to(device), attn.to(device)


def _device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def frozen_logprobs(model: torch.nn.Module, rollouts: Rollouts, temperature: float) -> Tensor:
    """Log-probs [B, T] of a model that is not being updated (old policy, reference)."""
    ids, attn = model_inputs(rollouts, _device(model))
    logp, _ = completion_logprobs(model, ids, attn, rollouts.prompt_ids.shape[1], temperature)
    return logp.cpu() * rollouts.completion_mask


@dataclass
class TrainBatch:
    """What the updates need, all [B] or [B, T]."""

    rollouts: Rollouts
    old_logp: Tensor
    ref_logp: Tensor | None
    advantages: Tensor
    rewards: Tensor
    loss_mask: Tensor


def prepare_batch(
    batch: ScoredBatch,
    policy: torch.nn.Module,
    ref: torch.nn.Module | None,
    algo: Algorithm,
    budget: Budget,
) -> tuple[TrainBatch, dict[str, float]]:
    """Old and reference log-probs, shaped rewards and advantages."""
    r = batch.rollouts
    # The engine's log-probs are reused only when they provably equal the trainer's (HF sampler,
    # no top-p/top-k); otherwise (vLLM, truncated sampling) the policy recomputes them.
    old = r.logprobs * r.completion_mask if r.logprobs_exact else None
    if old is None:
        old = frozen_logprobs(policy, r, budget.temperature)
    ref_logp = frozen_logprobs(ref, r, budget.temperature) if ref is not None else None
    rewards = batch.scores.clone()
    metrics: dict[str, float] = {}
    if algo.overlong_buffer:
        penalty = soft_overlong_penalty(
            r.lengths, budget.max_new_tokens, algo.overlong_buffer, algo.overlong_penalty
        )
        rewards = rewards + penalty
        metrics["reward/overlong_penalty_mean"] = penalty.mean().item()
    if ref_logp is not None and algo.kl_in == "reward":
        kl = masked_sum(KL_ESTIMATORS.get(algo.kl_estimator)(old, ref_logp), r.completion_mask, -1)
        rewards = rewards - algo.kl_coef * kl
        metrics["reward/kl_penalty_mean"] = (algo.kl_coef * kl).mean().item()
    advantages = group_advantages(rewards, budget.group_size, algo)
    loss_mask = r.completion_mask
    if algo.mask_truncated:
        loss_mask = mask_truncated(loss_mask, r.truncated)
    metrics["reward/shaped_mean"] = rewards.mean().item()
    tb = TrainBatch(
        r, old, ref_logp if algo.kl_in == "loss" else None, advantages, rewards, loss_mask
    )
    return tb, metrics


def run_updates(
    policy: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    tb: TrainBatch,
    algo: Algorithm,
    optim: Optim,
    budget: Budget,
    *,
    seed: int,
    step: int,
) -> list[dict[str, float]]:
    """`ppo_epochs` passes over the batch, each in `minibatches` shuffled chunks; one optimizer
    update per chunk. Raises DivergedError on a non-finite loss or gradient."""
    device = _device(policy)
    ids, attn = model_inputs(tb.rollouts, device)
    prompt_len = tb.rollouts.prompt_ids.shape[1]
    n = ids.shape[0]
    chunk = math.ceil(n / algo.minibatches)
    stats = []
    policy.train()
    for epoch in range(algo.ppo_epochs):
        order = torch.randperm(n, generator=generator(seed, "minibatch", str(step), str(epoch)))
        for idx in order.split(chunk):
            s = _update(policy, optimizer, ids[idx], attn[idx], prompt_len, tb, idx, algo, budget)
            if not math.isfinite(s["loss"]):
                raise DivergedError(step, "loss")
            s["grad_norm"] = _clip_and_step(policy, optimizer, optim, step)
            scheduler.step()
            s["lr"] = scheduler.get_last_lr()[0]
            stats.append(s)
    return stats


def _update(policy, optimizer, ids, attn, prompt_len, tb: TrainBatch, idx, algo, budget):
    optimizer.zero_grad(set_to_none=True)
    logp, entropy = completion_logprobs(policy, ids, attn, prompt_len, budget.temperature)
    if algo.entropy_coef == 0:
        entropy = entropy.detach()
    cpu_idx, dev = idx.cpu(), logp.device
    loss, stats = policy_loss(
        logp,
        tb.old_logp[cpu_idx].to(dev),
        tb.advantages[cpu_idx].to(dev),
        tb.loss_mask[cpu_idx].to(dev),
        algo,
        ref_logp=None if tb.ref_logp is None else tb.ref_logp[cpu_idx].to(dev),
        entropy=entropy,
    )
    if math.isfinite(stats["loss"]):
        loss.backward()
    return stats


def _clip_and_step(policy, optimizer, optim: Optim, step: int) -> float:
    params = [p for p in policy.parameters() if p.grad is not None]
    max_norm = optim.grad_clip if optim.grad_clip > 0 else float("inf")
    norm = float(torch.nn.utils.clip_grad_norm_(params, max_norm))
    if not math.isfinite(norm):
        raise DivergedError(step, "gradient norm")
    optimizer.step()
    return norm


def check_weights(policy: torch.nn.Module, step: int) -> None:
    """Any NaN/inf weight makes the sum of sums non-finite: one cheap reduction."""
    with torch.no_grad():
        total = torch.stack([p.sum() for p in policy.parameters()]).sum()
    if not torch.isfinite(total):
        raise DivergedError(step, "weights")
