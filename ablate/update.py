"""The forward passes and the optimizer loop of one RL step: log-probs (and an estimator head's
outputs) under the policy before the updates, then `ppo_epochs` × `minibatches` optimizer
updates of the policy loss plus the estimator's extra loss. No branch on the estimator: it is
reached only through the `AdvantageEstimator` protocol."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
from torch import Tensor

from ablate import fast_llama
from ablate.algorithms import Algorithm
from ablate.errors import DivergedError
from ablate.estimators import AdvantageEstimator, Estimate, HeadReadout
from ablate.objective import policy_loss
from ablate.rollout.base import Rollouts
from ablate.seeding import generator
from ablate.shaping import ShapedBatch
from ablate.trial import Optim


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
    head: torch.nn.Module | None = None,
) -> tuple[Tensor, Tensor, Tensor | None]:
    """`completion_logprobs` plus, with a head (e.g. a value head), its outputs [B, T] read from
    the same forward at the positions that predict each completion token."""
    hidden, logits = completion_outputs(model, ids, attn, prompt_len, head is not None)
    logps = torch.log_softmax(logits.float() / temperature, dim=-1)  # [B, T, V]
    targets = ids[:, prompt_len:]
    logp = logps.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    entropy = -(logps.exp() * logps).sum(-1)
    outputs = None if head is None else head(hidden)
    return logp, entropy, outputs


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
def frozen_logprobs_and_head(
    model: torch.nn.Module, head: torch.nn.Module, rollouts: Rollouts, temperature: float
) -> tuple[Tensor, Tensor]:
    """Log-probs and the head's outputs [B, T] before the updates, from one forward."""
    ids, attn = model_inputs(rollouts, _device(model))
    prompt_len = rollouts.prompt_ids.shape[1]
    logp, _, outputs = completion_forward(model, ids, attn, prompt_len, temperature, head)
    mask = rollouts.completion_mask
    return logp.cpu() * mask, outputs.cpu() * mask  # type: ignore[union-attr]


@dataclass
class FrozenPass:
    """No-grad results of the policy before the updates (and of the reference model)."""

    old_logp: Tensor  # [B, T]
    ref_logp: Tensor | None  # [B, T]; None without a reference model
    readout: HeadReadout | None  # the estimator head's outputs; None when it has no head


def frozen_pass(
    policy: torch.nn.Module,
    ref: torch.nn.Module | None,
    head: torch.nn.Module | None,
    rollouts: Rollouts,
    temperature: float,
) -> FrozenPass:
    """Old log-probs, reference log-probs and the head's outputs, each computed once."""
    # The engine's log-probs are reused only when they provably equal the trainer's (HF sampler,
    # no top-p/top-k); otherwise (vLLM, truncated sampling) the policy recomputes them.
    r = rollouts
    old = r.logprobs * r.completion_mask if r.logprobs_exact else None
    readout = None
    if head is not None:
        t0 = time.perf_counter()
        recomputed, outputs = frozen_logprobs_and_head(policy, head, r, temperature)
        # the pass is the head's cost only when the engine's log-probs made it otherwise unneeded
        readout = HeadReadout(outputs, time.perf_counter() - t0 if old is not None else 0.0)
        old = old if old is not None else recomputed
    if old is None:
        old = frozen_logprobs(policy, r, temperature)
    ref_logp = frozen_logprobs(ref, r, temperature) if ref is not None else None
    return FrozenPass(old, ref_logp, readout)


@dataclass
class Learner:
    """What the updates change: the policy, the estimator's own parameters (a value head) and
    the optimizer and schedule over both."""

    policy: torch.nn.Module
    estimator: AdvantageEstimator
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler


@dataclass(frozen=True)
class UpdateConfig:
    algo: Algorithm
    optim: Optim
    temperature: float
    seed: int


@dataclass(frozen=True)
class Minibatch:
    ids: Tensor  # [b, prompt + T] on the model's device
    attn: Tensor  # [b, prompt + T]
    prompt_len: int
    rows: Tensor  # [b] indices into the step's batch (CPU)


def run_updates(
    learner: Learner, batch: ShapedBatch, estimate: Estimate, config: UpdateConfig, step: int
) -> list[dict[str, float]]:
    """`ppo_epochs` passes over the batch, each in `minibatches` shuffled chunks; one optimizer
    update per chunk, the policy's gradient and each estimator module's clipped apart (a value
    head's norm must not shrink the policy's). Raises DivergedError on a non-finite loss or
    gradient."""
    algo = config.algo
    ids, attn = model_inputs(batch.rollouts, _device(learner.policy))
    prompt_len, n = batch.rollouts.prompt_ids.shape[1], ids.shape[0]
    chunk = math.ceil(n / algo.minibatches)
    stats = []
    learner.policy.train()
    for epoch in range(algo.ppo_epochs):
        key = ("minibatch", str(step), str(epoch))
        order = torch.randperm(n, generator=generator(config.seed, *key))
        for idx in order.split(chunk):
            mb = Minibatch(ids[idx], attn[idx], prompt_len, idx.cpu())
            s, finite = _minibatch_update(learner, mb, batch, estimate, config)
            if not finite:
                raise DivergedError(step, "loss")
            s["grad_norm"] = _clip(learner.policy, config.optim, step)
            for name, module in learner.estimator.trained_modules().items():
                s[f"{name}/grad_norm"] = _clip(module, config.optim, step)
            learner.optimizer.step()
            learner.scheduler.step()
            s["lr"] = learner.scheduler.get_last_lr()[0]
            stats.append(s)
    return stats


def _minibatch_update(
    learner: Learner, mb: Minibatch, batch: ShapedBatch, estimate: Estimate, config: UpdateConfig
) -> tuple[dict[str, float], bool]:
    """Forward, loss and backward of one minibatch: (statistics, whether the loss is finite)."""
    algo, estimator = config.algo, learner.estimator
    learner.optimizer.zero_grad(set_to_none=True)
    logp, entropy, outputs = completion_forward(
        learner.policy, mb.ids, mb.attn, mb.prompt_len, config.temperature, estimator.head
    )
    if algo.entropy_coef == 0:
        entropy = entropy.detach()
    dev = logp.device

    def rows(x: Tensor) -> Tensor:
        return x[mb.rows].to(dev)

    loss_mask = rows(batch.loss_mask)
    loss, stats = policy_loss(
        logp,
        rows(batch.old_logp),
        rows(estimate.advantages),
        loss_mask,
        algo,
        ref_logp=None if batch.ref_logp is None else rows(batch.ref_logp),
        entropy=entropy,
        is_weights=None if batch.is_weights is None else rows(batch.is_weights),
        group_ids=rows(batch.rollouts.group_ids),
    )
    targets = {k: rows(v) for k, v in estimate.targets.items()}
    extra, extra_stats = estimator.extra_loss(outputs, targets, loss_mask)
    finite = math.isfinite(stats["loss"])
    if extra is not None:
        loss = loss + extra
        stats.update(extra_stats)
        finite = finite and math.isfinite(float(extra.detach()))
    if finite:
        loss.backward()
    return stats, finite


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
