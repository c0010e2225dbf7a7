"""The policy's forward passes over rollouts: log-probs [B, T] of the completion tokens under
log_softmax(logits / temperature), their entropy, and an estimator head's outputs from the same
forward; and the no-grad passes of one RL step before its updates (`frozen_pass`), which say
which forwards ran so the step's compute is read from them, never re-derived."""

from __future__ import annotations

import time

import torch
from torch import Tensor

from ablate.base.records import FrozenPass, HeadReadout, Rollouts
from ablate.models import fast_llama


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


def model_device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def frozen_logprobs(model: torch.nn.Module, rollouts: Rollouts, temperature: float) -> Tensor:
    """Log-probs [B, T] of a model that is not being updated (old policy, reference)."""
    ids, attn = model_inputs(rollouts, model_device(model))
    logp, _ = completion_logprobs(model, ids, attn, rollouts.prompt_ids.shape[1], temperature)
    return logp.cpu() * rollouts.completion_mask


@torch.no_grad()
def frozen_logprobs_and_head(
    model: torch.nn.Module, head: torch.nn.Module, rollouts: Rollouts, temperature: float
) -> tuple[Tensor, Tensor]:
    """Log-probs and the head's outputs [B, T] before the updates, from one forward."""
    ids, attn = model_inputs(rollouts, model_device(model))
    prompt_len = rollouts.prompt_ids.shape[1]
    logp, _, outputs = completion_forward(model, ids, attn, prompt_len, temperature, head)
    mask = rollouts.completion_mask
    return logp.cpu() * mask, outputs.cpu() * mask  # type: ignore[union-attr]


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
    policy_pass = old is None or head is not None
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
    return FrozenPass(old, ref_logp, readout, policy_pass, ref is not None)
