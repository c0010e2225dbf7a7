"""The optimizer loop of one RL step: `ppo_epochs` × `minibatches` updates of the policy loss
plus the estimator's extra loss, then a check that no weight went non-finite. No branch on the
estimator: it is reached only through the `AdvantageEstimator` protocol. The result says what
was trained (`records.UpdateResult`), so the step's accounting reads it instead of re-deriving it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from ablate.base.errors import DivergedError
from ablate.base.records import Estimate, ShapedBatch, UpdateResult
from ablate.base.seeding import generator
from ablate.factors.algorithms import Algorithm
from ablate.factors.estimators import AdvantageEstimator
from ablate.factors.objective import policy_loss
from ablate.factors.spec import Optim
from ablate.stages.forward import completion_forward, forward_tokens, model_device, model_inputs


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
) -> UpdateResult:
    """`ppo_epochs` passes over the batch, each in `minibatches` shuffled chunks; one optimizer
    update per chunk, the policy's gradient and each estimator module's clipped apart (a value
    head's norm must not shrink the policy's). Raises DivergedError on a non-finite loss,
    gradient or weight."""
    stats = _optimise(learner, batch, estimate, config, step)
    for module in (learner.policy, *learner.estimator.trained_modules().values()):
        check_weights(module, step)
    epochs = config.algo.ppo_epochs
    return UpdateResult(
        stats=stats,
        epochs=epochs,
        trained_tokens=int(batch.loss_mask.sum()) * epochs,
        update_tokens=forward_tokens(learner.policy, batch.rollouts) * epochs,
        estimator_metrics=learner.estimator.step_metrics(),
    )


def _optimise(
    learner: Learner, batch: ShapedBatch, estimate: Estimate, config: UpdateConfig, step: int
) -> list[dict[str, float]]:
    algo = config.algo
    ids, attn = model_inputs(batch.rollouts, model_device(learner.policy))
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
    targets = None if estimate.targets is None else estimate.targets.select(mb.rows, dev)
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
