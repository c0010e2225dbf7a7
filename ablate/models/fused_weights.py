"""The weights one fused forward reads (`fast_llama`): each decoder layer's norms and projections,
q/k/v and gate/up concatenated when decoding (fewer, larger matmuls) or kept apart when
training, plus the embedding, head and rotary tables. Read from the live modules on every
call, never copied."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class Layer:
    """One decoder layer's weights. `qkv` and `gate_up` hold either one concatenated matrix
    (decoding: fewer, larger matmuls) or the separate ones (training: the backward of slicing a
    fused output would zero-fill and concatenate full-size gradients)."""

    ln1: Tensor
    qkv: tuple[Tensor, ...]
    qkv_bias: tuple[Tensor | None, ...]
    o: Tensor
    o_bias: Tensor | None
    ln2: Tensor
    gate_up: tuple[Tensor, ...]
    gate_up_bias: tuple[Tensor | None, ...]
    down: Tensor
    down_bias: Tensor | None


@dataclass(frozen=True)
class Weights:
    embed: Tensor
    padding_idx: int | None
    layers: list[Layer]
    norm: Tensor
    head: Tensor
    heads: int
    kv_heads: int
    head_dim: int
    eps: float
    inv_freq: Tensor
    rope_scaling: float


def _group(linears, fuse: bool) -> tuple[tuple[Tensor, ...], tuple[Tensor | None, ...]]:
    weights = tuple(m.weight for m in linears)
    biases = tuple(m.bias for m in linears)
    if not fuse:
        return weights, biases
    bias = None if any(b is None for b in biases) else torch.cat(biases)  # type: ignore[arg-type]
    return (torch.cat(weights),), (bias,)


def fuse_weights(model, *, fuse: bool = True) -> Weights:
    """The weights of one forward, q/k/v and gate/up concatenated when `fuse`. Concatenation is
    differentiable, so gradients reach the model's own parameters; build once per forward (or
    per rollout, under no_grad)."""
    layers = []
    for block in model.model.layers:
        a, m = block.self_attn, block.mlp
        qkv, qkv_bias = _group((a.q_proj, a.k_proj, a.v_proj), fuse)
        gate_up, gate_up_bias = _group((m.gate_proj, m.up_proj), fuse)
        layers.append(
            Layer(
                ln1=block.input_layernorm.weight,
                qkv=qkv,
                qkv_bias=qkv_bias,
                o=a.o_proj.weight,
                o_bias=a.o_proj.bias,
                ln2=block.post_attention_layernorm.weight,
                gate_up=gate_up,
                gate_up_bias=gate_up_bias,
                down=m.down_proj.weight,
                down_bias=m.down_proj.bias,
            )
        )
    cfg, rotary = model.config, model.model.rotary_emb
    return Weights(
        embed=model.model.embed_tokens.weight,
        padding_idx=model.model.embed_tokens.padding_idx,
        layers=layers,
        norm=model.model.norm.weight,
        head=model.lm_head.weight,
        heads=cfg.num_attention_heads,
        kv_heads=cfg.num_key_value_heads,
        head_dim=getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads,
        eps=cfg.rms_norm_eps,
        inv_freq=rotary.inv_freq,
        rope_scaling=float(rotary.attention_scaling),
    )
