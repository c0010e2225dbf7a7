"""Model FLOPs counted from the architecture, for the compute axes of a trial.

One definition, used for every forward the trainer runs:

- a forward over a batch costs 2 × (weights of every linear layer of the body) per token it
  processes, plus 2 × (LM-head weights) per token whose next-token distribution is read (the
  completion tokens), plus 4 × layers × attention width per attended (query, key) pair (the
  score and value products; causal: the token at position t attends t + 1 positions);
- a backward costs 2 × its forward; embedding look-ups, norms, activations and the softmax are
  left out (element-wise work, no matmul);
- the tokens a forward processes are those `forward.forward_tokens` counts: each distinct prompt
  once (a group's G completions share it: the KV-cached sampler prefills one prompt per group,
  and the fused Llama path runs one prompt pass), then every completion token of every row.

`step_flops` applies it to one RL step: sampling (one forward of every generated sample, dynamic
sampling's discarded batches included), the frozen pass (the policy's old log-probs when the
engine's are not reusable or a critic head needs its values, and the reference model), and
`ppo_epochs` forward + backward passes of the policy (with the critic's value head) over the
trained batch. `step_compute` reads which of those ran from the stages' own records.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ablate.base.records import FrozenPass, Rollouts, ScoredBatch, UpdateResult


@dataclass(frozen=True)
class Shape:
    """What a forward's cost depends on: weights of the body's linear layers, of the LM head,
    the number of layers and the attention width (heads × head dimension); and the weights of an
    estimator head read from the policy's hidden states (PPO's value head; 0 without one)."""

    body_weights: int
    head_weights: int
    layers: int
    attention_width: int
    critic_weights: int = 0


def linear_weights(module: nn.Module, skip: tuple[nn.Module, ...] = ()) -> int:
    """Weights (not biases) of every `nn.Linear` in `module`, those in `skip` left out."""
    return sum(
        m.in_features * m.out_features
        for m in module.modules()
        if isinstance(m, nn.Linear) and not any(m is s for s in skip)
    )


def matrix_weights(module: nn.Module | None) -> int:
    """Weights of a small head's weight matrices (a critic's value head); 0 for None."""
    if module is None:
        return 0
    return sum(p.numel() for p in module.parameters() if p.ndim > 1)


def model_shape(model: nn.Module, critic: nn.Module | None = None) -> Shape:
    """A causal LM's `Shape`, read from its modules and its config (Llama-style names), with the
    estimator head `critic` it trains beside it (if any)."""
    cfg = model.config
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    head_weights = linear_weights(head) if head is not None else 0
    skip = (head,) if head is not None else ()
    heads = cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    return Shape(
        linear_weights(model, skip),
        head_weights,
        cfg.num_hidden_layers,
        heads * head_dim,
        matrix_weights(critic),
    )


@dataclass(frozen=True)
class Work:
    """What one forward over a batch processes: tokens through the body, tokens through the LM
    head, and attended (query, key) pairs."""

    tokens: int
    head_tokens: int
    pairs: int

    def __add__(self, other: Work) -> Work:
        return Work(
            self.tokens + other.tokens,
            self.head_tokens + other.head_tokens,
            self.pairs + other.pairs,
        )


def _triangle(n: torch.Tensor) -> int:
    """Σ over sequences of n(n+1)/2: causal pairs of sequences of lengths `n`."""
    n = n.long()
    return int((n * (n + 1) // 2).sum())


def rollout_work(rollouts: Rollouts) -> Work:
    """One forward over `rollouts`: each distinct prompt once, then every completion token,
    which attends its prompt and the completion tokens before it."""
    prompt_ids, prompt_mask = rollouts.prompt_ids, rollouts.prompt_mask
    p = prompt_mask.sum(-1).long()  # [B]
    c = rollouts.completion_mask.sum(-1).long()  # [B]
    rows = torch.cat([prompt_ids, prompt_mask.to(prompt_ids.dtype)], 1)
    distinct = torch.unique(rows, dim=0)[:, prompt_ids.shape[1] :].sum(-1).long()
    tokens = int(distinct.sum() + c.sum())
    pairs = _triangle(distinct) + int((c * p).sum()) + _triangle(c)
    return Work(tokens, int(c.sum()), pairs)


def forward_flops(shape: Shape, work: Work) -> float:
    """Model FLOPs of one forward doing `work` (the module docstring's definition)."""
    return (
        2.0 * shape.body_weights * work.tokens
        + 2.0 * shape.head_weights * work.head_tokens
        + 4.0 * shape.layers * shape.attention_width * work.pairs
    )


@dataclass(frozen=True)
class StepPasses:
    """Which passes one RL step ran besides sampling (see `step_flops`)."""

    policy_frozen: bool
    """A no-grad policy forward for old log-probs or the critic's values."""
    reference: bool
    """A no-grad forward of the reference model."""
    epochs: int
    """Forward + backward passes of the policy over the trained batch (0: nothing trained)."""
    critic_weights: int = 0
    """Linear weights of a critic head on the policy's hidden states (PPO's value head)."""


def step_flops(
    shape: Shape, generated: Rollouts, trained: Rollouts, passes: StepPasses
) -> tuple[float, float]:
    """(sampling FLOPs, training FLOPs) of one RL step: `generated` holds every sample the step
    generated, `trained` the ones it trained on."""
    sample = forward_flops(shape, rollout_work(generated))
    if not passes.epochs:
        return sample, 0.0
    work = rollout_work(trained)
    policy = forward_flops(shape, work)
    critic = 2.0 * passes.critic_weights * work.head_tokens
    frozen = (policy + critic) * passes.policy_frozen + policy * passes.reference
    return sample, frozen + 3.0 * (policy + critic) * passes.epochs


def step_compute(
    shape: Shape, batch: ScoredBatch, frozen: FrozenPass | None, update: UpdateResult | None
) -> tuple[float, float]:
    """(sampling FLOPs, training FLOPs) of one RL step, from its stages' records: every sample
    the step generated, the no-grad passes `frozen` says ran and the passes `update` trained
    (None: the step trained nothing)."""
    passes = StepPasses(
        policy_frozen=frozen is not None and frozen.policy_pass,
        reference=frozen is not None and frozen.reference_pass,
        epochs=update.epochs if update is not None else 0,
        critic_weights=shape.critic_weights,
    )
    return step_flops(shape, batch.all_samples.rollouts, batch.rollouts, passes)
