"""Several trials' models in one pass: a measurement prototype for seed-batched trials (issue 46).

Trials of one arm that differ only in seed hold different weights from their first update on, so
one batched pass can share no matmul between them: the most it can do is issue one grouped
(batched) matmul, norm and attention kernel for all T trials instead of T of each, saving per-op
overhead, not arithmetic. This module measures that ceiling before anyone builds a batched
trainer around it: `StackedWeights` holds T Llama models' weights stacked along a leading trial
dimension, `stacked_logits` is the training forward (a full causal forward of fixed-length rows),
`StackedDecoder` the sampler's one-token step over a preallocated KV cache. Both compute, per
trial, what transformers' `LlamaForCausalLM` computes for that trial's model (tested to float
tolerance in tests/test_bench_batching.py); at T = 1 they are the lone-trial baseline, so
stacked-T against T × stacked-1 isolates what batching alone buys.

Limits (it is a benchmark, not a trainer): no biases, no prompt sharing, no packing of ragged
rows, default RoPE; `stack_models` refuses anything else.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from ablate.models.fast_llama import rope_tables, rotate


@dataclass(frozen=True)
class StackedLayer:
    ln1: Tensor  # [T, d]
    qkv: Tensor  # [T, d, (H + 2 Hk) D]  (transposed: x @ w)
    o: Tensor  # [T, H D, d]
    ln2: Tensor  # [T, d]
    gate_up: Tensor  # [T, d, 2 I]
    down: Tensor  # [T, I, d]


@dataclass(frozen=True)
class StackedWeights:
    embed: Tensor  # [T, V, d]
    layers: list[StackedLayer]
    norm: Tensor  # [T, d]
    head: Tensor  # [T, d, V]
    heads: int
    kv_heads: int
    head_dim: int
    eps: float
    inv_freq: Tensor  # [D / 2]
    rope_scaling: float = 1.0  # default RoPE (what `stack_models` accepts): no scaling

    @property
    def trials(self) -> int:
        return self.embed.shape[0]

    def leaves(self) -> list[Tensor]:
        """Every stacked tensor (what a batched optimiser would update)."""
        per_layer = [t for layer in self.layers for t in vars(layer).values()]
        return [self.embed, *per_layer, self.norm, self.head]


def stack_models(models: list, *, grad: bool = False) -> StackedWeights:
    """The weights of `models` (LlamaForCausalLM, same config) stacked along dimension 0, as
    fresh leaf tensors (requiring grad when `grad`: what a batched trainer would update)."""
    cfg = models[0].config
    rope = getattr(cfg, "rope_parameters", None) or {}
    first = models[0].model.layers[0]
    if rope.get("rope_type", "default") != "default" or first.self_attn.q_proj.bias is not None:
        raise ValueError("stack_models handles bias-free Llamas with default RoPE only")

    def stack(get, transpose: bool = False) -> Tensor:
        parts = [get(m).detach() for m in models]
        out = torch.stack([p.t() if transpose else p for p in parts])
        return out.contiguous().requires_grad_(grad)

    layers = []
    for i in range(cfg.num_hidden_layers):

        def block(m, i=i):
            return m.model.layers[i]

        def qkv(m, i=i):
            a = block(m, i).self_attn
            return torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight])

        def gate_up(m, i=i):
            mlp = block(m, i).mlp
            return torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight])

        layers.append(
            StackedLayer(
                ln1=stack(lambda m, i=i: block(m, i).input_layernorm.weight),
                qkv=stack(qkv, transpose=True),
                o=stack(lambda m, i=i: block(m, i).self_attn.o_proj.weight, transpose=True),
                ln2=stack(lambda m, i=i: block(m, i).post_attention_layernorm.weight),
                gate_up=stack(gate_up, transpose=True),
                down=stack(lambda m, i=i: block(m, i).mlp.down_proj.weight, transpose=True),
            )
        )
    return StackedWeights(
        embed=stack(lambda m: m.model.embed_tokens.weight),
        layers=layers,
        norm=stack(lambda m: m.model.norm.weight),
        head=stack(lambda m: m.lm_head.weight, transpose=True),
        heads=cfg.num_attention_heads,
        kv_heads=cfg.num_key_value_heads,
        head_dim=getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads,
        eps=cfg.rms_norm_eps,
        inv_freq=models[0].model.rotary_emb.inv_freq.detach(),
    )


def _norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """RMSNorm of x [T, N, d] with each trial's weight [T, d]."""
    return F.rms_norm(x, (x.shape[-1],), eps=eps) * weight[:, None]


def _rope(w: StackedWeights, positions: Tensor) -> tuple[Tensor, Tensor]:
    """cos and signed sin [1, S, 1, D] for positions [S]: fast_llama's tables, which read only
    the weights' `inv_freq` and `rope_scaling`."""
    return rope_tables(w, positions[None], w.embed.dtype)  # type: ignore[arg-type]


def _layer(x: Tensor, lw: StackedLayer, w: StackedWeights, rope, attend) -> Tensor:
    """x [T, B, S, d] → the same; `attend(q, k, v)` on [T B, H, S, D] tensors."""
    t, b, s, d = x.shape
    hd, h, hk = w.head_dim, w.heads, w.kv_heads
    qkv = torch.bmm(_norm(x.view(t, b * s, d), lw.ln1, w.eps), lw.qkv)
    qkv = qkv.view(t * b, s, h + 2 * hk, hd)
    qk = rotate(qkv[:, :, : h + hk], *rope)
    q, k, v = qk[:, :, :h], qk[:, :, h:], qkv[:, :, h + hk :]
    attn = attend(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    attn = attn.transpose(1, 2).reshape(t, b * s, h * hd)
    x = x + torch.bmm(attn, lw.o).view(t, b, s, d)
    gate, up = torch.bmm(_norm(x.view(t, b * s, d), lw.ln2, w.eps), lw.gate_up).chunk(2, -1)
    return x + torch.bmm(F.silu(gate) * up, lw.down).view(t, b, s, d)


def _embed(w: StackedWeights, ids: Tensor) -> Tensor:
    """ids [T, B, S] → [T, B, S, d], each trial from its own table (one lookup in the tables
    laid end to end)."""
    t, vocab, d = w.embed.shape
    offsets = torch.arange(t, device=ids.device).view(t, 1, 1) * vocab
    return F.embedding(ids + offsets, w.embed.reshape(t * vocab, d))


def _head(w: StackedWeights, x: Tensor) -> Tensor:
    """Final norm and head: x [T, B, S, d] → logits [T, B, S, V]."""
    t, b, s, d = x.shape
    return torch.bmm(_norm(x.view(t, b * s, d), w.norm, w.eps), w.head).view(t, b, s, -1)


def stacked_logits(w: StackedWeights, ids: Tensor) -> Tensor:
    """Logits [T, B, S, V] of unpadded rows ids [T, B, S] (trial i's rows through model i)."""
    rope = _rope(w, torch.arange(ids.shape[2]))
    gqa = w.heads != w.kv_heads

    def attend(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)

    x = _embed(w, ids)
    for lw in w.layers:
        x = _layer(x, lw, w, rope, attend)
    return _head(w, x)


class StackedDecoder:
    """One token per step for every row of every trial, over a KV cache preallocated for
    `capacity` positions ([T B, Hk, capacity, D] per layer); rows fed token by token from
    position 0 (a prompt is fed as the first steps, as a decoder without prefill would)."""

    def __init__(self, w: StackedWeights, rows: int, capacity: int) -> None:
        self.w, self.rows, self.length = w, rows, 0
        shape = (w.trials * rows, w.kv_heads, capacity, w.head_dim)
        dtype = w.embed.dtype
        self.keys = [torch.zeros(shape, dtype=dtype) for _ in w.layers]
        self.values = [torch.zeros(shape, dtype=dtype) for _ in w.layers]
        self.cos, self.sin = _rope(w, torch.arange(capacity))

    def step(self, tokens: Tensor) -> Tensor:
        """Logits [T, B, V] after feeding tokens [T, B] at the next position."""
        pos = self.length
        rope = (self.cos[:, pos : pos + 1], self.sin[:, pos : pos + 1])
        gqa = self.w.heads != self.w.kv_heads
        x = _embed(self.w, tokens[:, :, None])
        for i, lw in enumerate(self.w.layers):

            def attend(q: Tensor, k: Tensor, v: Tensor, i: int = i) -> Tensor:
                self.keys[i][:, :, pos] = k[:, :, 0]
                self.values[i][:, :, pos] = v[:, :, 0]
                keys, values = self.keys[i][:, :, : pos + 1], self.values[i][:, :, : pos + 1]
                return F.scaled_dot_product_attention(q, keys, values, enable_gqa=gqa)

            x = _layer(x, lw, self.w, rope, attend)
        self.length += 1
        return _head(self.w, x)[:, :, 0]
