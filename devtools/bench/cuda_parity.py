"""The trainer's CUDA path against its CPU path on the same weights and batch: the fused Llama
forward (`fast_llama`, through `completion_forward`) and one packed update's gradients, in fp32
and under bf16 autocast. Used by the CUDA check of `make gpu-check` and by the `gpu` tests.

Tolerances (stated, not tuned on a result: nothing has run on a GPU yet): fp32 with TF32 off
differs from the CPU only by summation order, ~1e-6 relative per op, so log-probs within 1e-4
and gradients within 1e-3 of their norm; bf16 keeps 8 mantissa bits (~4e-3 relative per op),
so log-probs within 0.1 on average over a 4-layer model.
"""

from __future__ import annotations

import copy

import torch

FP32_LOGP_MAX_ABS = 1e-4
FP32_GRAD_REL = 1e-3
BF16_LOGP_MEAN_ABS = 0.1


def ragged_batch(vocab: int, prompts: int = 4, group: int = 8, width: int = 7, steps: int = 24):
    """(ids, attn, prompt width): left-padded prompts × `group` rows, ragged completions."""
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(4, vocab, (prompts, width), generator=gen)
    mask = torch.ones(prompts, width, dtype=torch.long)
    for row in range(prompts):
        ids[row, :row], mask[row, :row] = 0, 0
    ids, mask = ids.repeat_interleave(group, 0), mask.repeat_interleave(group, 0)
    comp = torch.randint(4, vocab, (prompts * group, steps), generator=gen)
    lengths = torch.randint(1, steps + 1, (prompts * group,), generator=gen)
    lengths[0] = steps
    comp_mask = (torch.arange(steps)[None] < lengths[:, None]).long()
    return torch.cat([ids, comp * comp_mask], 1), torch.cat([mask, comp_mask], 1), width


def _forward_and_grads(model, ids, attn, width, device, precision):
    from ablate.base.devices import autocast
    from ablate.stages.forward import completion_forward

    model = model.to(device).train()
    model.zero_grad(set_to_none=True)
    ids, attn = ids.to(device), attn.to(device)
    with autocast(str(device), precision):
        logp, _, _ = completion_forward(model, ids, attn, width, 1.0)
    mask = attn[:, width:].float()
    (-(logp * mask).sum() / mask.sum()).backward()
    grads = {n: p.grad.detach().cpu() for n, p in model.named_parameters()}
    return (logp.detach().cpu() * mask.cpu()), mask.cpu(), grads


def parity(model: torch.nn.Module, device: str = "cuda") -> dict[str, float]:
    """|CUDA − CPU| of the completion log-probs and gradients of one packed update, in fp32 and
    under bf16 autocast; `model` is left untouched (copies are moved)."""
    vocab = model.config.vocab_size
    ids, attn, width = ragged_batch(vocab)
    ref_logp, mask, ref_grads = _forward_and_grads(
        copy.deepcopy(model).float(), ids, attn, width, "cpu", "fp32"
    )
    out: dict[str, float] = {}
    for precision in ("fp32", "bf16"):
        logp, _, grads = _forward_and_grads(
            copy.deepcopy(model).float(), ids, attn, width, device, precision
        )
        diff = (logp - ref_logp)[mask > 0].abs()
        rel = max(
            float((grads[n] - g).norm() / g.norm().clamp(min=1e-12)) for n, g in ref_grads.items()
        )
        out[f"{precision} logp max abs"] = float(diff.max())
        out[f"{precision} logp mean abs"] = float(diff.mean())
        out[f"{precision} grad max rel"] = rel
    return out


def parity_passed(result: dict[str, float]) -> bool:
    return (
        result["fp32 logp max abs"] <= FP32_LOGP_MAX_ABS
        and result["fp32 grad max rel"] <= FP32_GRAD_REL
        and result["bf16 logp mean abs"] <= BF16_LOGP_MEAN_ABS
    )
