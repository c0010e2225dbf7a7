"""Log-probabilities (and critic values) under the policy, rewards → advantages, and the
`ppo_epochs` × `minibatches` optimizer updates of one RL step."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
from torch import Tensor

from ablate import fast_llama
from ablate.algorithms import Algorithm
from ablate.batch import ScoredBatch
from ablate.critic import (
    ValueHead,
    explained_variance,
    gae,
    masked_whiten,
    token_rewards,
    value_loss,
)
from ablate.errors import DivergedError
from ablate.objective import (
    KL_ESTIMATORS,
    group_advantages,
    masked_mean,
    masked_sum,
    policy_loss,
)
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
    logp, entropy, _ = completion_forward(model, ids, attn, prompt_len, temperature)
    return logp, entropy


def completion_forward(
    model: torch.nn.Module,
    ids: Tensor,
    attn: Tensor,
    prompt_len: int,
    temperature: float,
    critic: ValueHead | None = None,
) -> tuple[Tensor, Tensor, Tensor | None]:
    """`completion_logprobs` plus, with a critic, the values [B, T] read from the same forward
    at the positions that predict each completion token."""
    hidden, logits = completion_outputs(model, ids, attn, prompt_len, critic is not None)
    logps = torch.log_softmax(logits.float() / temperature, dim=-1)  # [B, T, V]
    targets = ids[:, prompt_len:]
    logp = logps.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    entropy = -(logps.exp() * logps).sum(-1)
    values = None if critic is None else critic(hidden)
    return logp, entropy, values


def completion_outputs(
    model: torch.nn.Module, ids: Tensor, attn: Tensor, prompt_len: int, want_hidden: bool
) -> tuple[Tensor | None, Tensor]:
    """(final hidden states or None, logits), both [B, T, ...], at the positions that predict
    the completion tokens. Llama models run each distinct prompt once (`fast_llama`)."""
    if fast_llama.supports(model):
        hidden = fast_llama.completion_hidden(model, ids, attn, prompt_len)
        return hidden, fast_llama.logits_from_hidden(model, hidden)
    positions = (attn.cumsum(-1) - 1).clamp(min=0)
    out = model(
        input_ids=ids,
        attention_mask=attn,
        position_ids=positions,
        output_hidden_states=want_hidden,
    )
    hidden = out.hidden_states[-1][:, prompt_len - 1 : -1] if want_hidden else None
    return hidden, out.logits[:, prompt_len - 1 : -1]


def forward_tokens(model: torch.nn.Module, rollouts: Rollouts) -> int:
    """Non-padding tokens one training forward of `rollouts` processes: each distinct prompt
    once on the fused Llama path (its G rows share it), every row's prompt otherwise."""
    prompt_ids, prompt_mask = rollouts.prompt_ids, rollouts.prompt_mask
    if fast_llama.supports(model):
        _, prompt_mask, _ = fast_llama.distinct_prompts(prompt_ids, prompt_mask)
    return int(prompt_mask.sum() + rollouts.completion_mask.sum())


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


@torch.no_grad()
def frozen_logprobs_and_values(
    model: torch.nn.Module, critic: ValueHead, rollouts: Rollouts, temperature: float
) -> tuple[Tensor, Tensor]:
    """Log-probs and values [B, T] before the updates (old policy, V_old), from one forward."""
    ids, attn = model_inputs(rollouts, _device(model))
    prompt_len = rollouts.prompt_ids.shape[1]
    logp, _, values = completion_forward(model, ids, attn, prompt_len, temperature, critic)
    mask = rollouts.completion_mask
    return logp.cpu() * mask, values.cpu() * mask  # type: ignore[union-attr]


@dataclass
class TrainBatch:
    """What the updates need, all [B] or [B, T]; advantages are [B] (group) or [B, T] (GAE)."""

    rollouts: Rollouts
    old_logp: Tensor
    ref_logp: Tensor | None
    advantages: Tensor
    rewards: Tensor
    loss_mask: Tensor
    old_values: Tensor | None = None
    returns: Tensor | None = None


def prepare_batch(
    batch: ScoredBatch,
    policy: torch.nn.Module,
    ref: torch.nn.Module | None,
    algo: Algorithm,
    budget: Budget,
    critic: ValueHead | None = None,
) -> tuple[TrainBatch, dict[str, float]]:
    """Old and reference log-probs, shaped rewards and advantages (group-relative, or GAE from
    the critic's values when algo.advantage="gae")."""
    r = batch.rollouts
    if algo.advantage == "gae" and critic is None:
        raise ValueError("advantage='gae' needs the critic")
    old, old_values, critic_seconds = _old_logp_and_values(policy, critic, r, budget.temperature)
    ref_logp = frozen_logprobs(ref, r, budget.temperature) if ref is not None else None
    rewards = batch.scores.clone()
    metrics: dict[str, float] = {}
    if algo.overlong_buffer:
        penalty = soft_overlong_penalty(
            r.lengths, budget.max_new_tokens, algo.overlong_buffer, algo.overlong_penalty
        )
        rewards = rewards + penalty
        metrics["reward/overlong_penalty_mean"] = penalty.mean().item()
    outcome, kl_tok = rewards, None
    if ref_logp is not None and algo.kl_in == "reward":
        kl_tok = KL_ESTIMATORS.get(algo.kl_estimator)(old, ref_logp)
        kl = masked_sum(kl_tok, r.completion_mask, -1)
        rewards = rewards - algo.kl_coef * kl
        metrics["reward/kl_penalty_mean"] = (algo.kl_coef * kl).mean().item()
    loss_mask = r.completion_mask
    if algo.mask_truncated:
        loss_mask = mask_truncated(loss_mask, r.truncated)
    metrics["reward/shaped_mean"] = rewards.mean().item()
    ref_for_loss = ref_logp if algo.kl_in == "loss" else None
    if old_values is None:
        advantages = group_advantages(rewards, budget.group_size, algo)
        return TrainBatch(r, old, ref_for_loss, advantages, rewards, loss_mask), metrics
    t0 = time.perf_counter()
    penalty = None if kl_tok is None else algo.kl_coef * kl_tok
    advantages, returns, critic_metrics = _gae_advantages(
        outcome, penalty, old_values, r.completion_mask, loss_mask, algo
    )
    metrics.update(critic_metrics)
    metrics["perf/critic_seconds"] = critic_seconds + time.perf_counter() - t0
    tb = TrainBatch(r, old, ref_for_loss, advantages, rewards, loss_mask, old_values, returns)
    return tb, metrics


def _old_logp_and_values(
    policy: torch.nn.Module, critic: ValueHead | None, r: Rollouts, temperature: float
) -> tuple[Tensor, Tensor | None, float]:
    """Old log-probs, V_old (with a critic) and the seconds the critic's extra pass took."""
    # The engine's log-probs are reused only when they provably equal the trainer's (HF sampler,
    # no top-p/top-k); otherwise (vLLM, truncated sampling) the policy recomputes them.
    old = r.logprobs * r.completion_mask if r.logprobs_exact else None
    if critic is None:
        return (old if old is not None else frozen_logprobs(policy, r, temperature)), None, 0.0
    t0 = time.perf_counter()
    recomputed, values = frozen_logprobs_and_values(policy, critic, r, temperature)
    # the pass is the critic's cost only when the engine's log-probs made it otherwise unneeded
    seconds = time.perf_counter() - t0 if old is not None else 0.0
    return (old if old is not None else recomputed), values, seconds


def _gae_advantages(
    outcome: Tensor,
    kl_penalty: Tensor | None,
    old_values: Tensor,
    mask: Tensor,
    loss_mask: Tensor,
    algo: Algorithm,
) -> tuple[Tensor, Tensor, dict[str, float]]:
    """Per-token advantages [B, T] and returns from the outcome [B] and per-token KL penalty."""
    token_r = token_rewards(outcome, mask, kl_penalty)
    advantages, returns = gae(token_r, old_values, mask, algo.gae_gamma, algo.gae_lambda)
    if algo.whiten_advantages:  # over the tokens that are trained on
        advantages = masked_whiten(advantages, loss_mask)
    metrics = {
        "critic/explained_var": explained_variance(old_values, returns, mask),
        "critic/return_mean": masked_mean(returns, mask).item(),
    }
    return advantages, returns, metrics


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
    critic: ValueHead | None = None,
) -> list[dict[str, float]]:
    """`ppo_epochs` passes over the batch, each in `minibatches` shuffled chunks; one optimizer
    update per chunk (the critic, when given, is trained in the same updates: its parameters
    are a group of `optimizer`). Raises DivergedError on a non-finite loss or gradient."""
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
            s = _update(
                policy, critic, optimizer, ids[idx], attn[idx], prompt_len, tb, idx, algo, budget
            )
            if not math.isfinite(s["loss"]) or not math.isfinite(s.get("critic/value_loss", 0)):
                raise DivergedError(step, "loss")
            s["grad_norm"] = _clip(policy, optim, step)
            if critic is not None:  # clipped apart: the head's norm must not shrink the policy's
                s["critic/grad_norm"] = _clip(critic, optim, step)
            optimizer.step()
            scheduler.step()
            s["lr"] = scheduler.get_last_lr()[0]
            stats.append(s)
    return stats


def _update(policy, critic, optimizer, ids, attn, prompt_len, tb: TrainBatch, idx, algo, budget):
    optimizer.zero_grad(set_to_none=True)
    logp, entropy, values = completion_forward(
        policy, ids, attn, prompt_len, budget.temperature, critic
    )
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
    if values is not None:
        t0 = time.perf_counter()
        v_loss, v_stats = _critic_loss(values, tb, cpu_idx, algo)
        loss = loss + algo.vf_coef * v_loss
        stats.update(v_stats, **{"perf/critic_seconds": time.perf_counter() - t0})
    if math.isfinite(stats["loss"]) and math.isfinite(stats.get("critic/value_loss", 0)):
        loss.backward()
    return stats


def _critic_loss(values: Tensor, tb: TrainBatch, cpu_idx: Tensor, algo: Algorithm):
    dev = values.device
    return value_loss(
        values,
        tb.old_values[cpu_idx].to(dev),  # type: ignore[index]
        tb.returns[cpu_idx].to(dev),  # type: ignore[index]
        tb.loss_mask[cpu_idx].to(dev),
        clip=algo.vf_clip,
        loss_agg=algo.loss_agg,
        norm_constant=algo.loss_norm_constant,
    )


def _clip(module: torch.nn.Module, optim: Optim, step: int) -> float:
    params = [p for p in module.parameters() if p.grad is not None]
    max_norm = optim.grad_clip if optim.grad_clip > 0 else float("inf")
    norm = float(torch.nn.utils.clip_grad_norm_(params, max_norm))
    if not math.isfinite(norm):
        raise DivergedError(step, "gradient norm")
    return norm


def check_weights(policy: torch.nn.Module, step: int) -> None:
    """Any NaN/inf weight makes the sum of sums non-finite: one cheap reduction."""
    with torch.no_grad():
        total = torch.stack([p.sum() for p in policy.parameters()]).sum()
    if not torch.isfinite(total):
        raise DivergedError(step, "weights")
