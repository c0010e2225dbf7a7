"""A functional forward for Llama-architecture causal LMs, over the module's live parameters.

Why it exists (measured, `make bench`): at the sizes this harness trains on a CPU,
transformers' generic forward spends much of a decode step in Python and in small element-wise
kernels, and every row of a GRPO group carries its own copy of the same prompt. This forward

- fuses the q/k/v projections into one matmul and gate/up into another,
- rotates q and k in one pass, and uses PyTorch's fused RMSNorm and SDPA kernels,
- runs each distinct prompt once and shares its keys/values with the G completions of its
  group: in training the gradients of all G rows flow back into that one prompt pass, which is
  exactly the gradient of G separate copies (the prompt's activations do not depend on the row).

It reads the parameters on every call (no copies that could go stale while training), computes
what `LlamaForCausalLM.forward` computes (tested to float tolerance, values and gradients), and
`supports()` refuses any configuration it does not reproduce, so callers fall back to
transformers. `ABLATE_FAST_LLAMA=0` turns it off (benchmarks compare both).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from ablate.models.decode_cache import SharedPrefixKV
from ablate.models.fused_weights import Layer, Weights, fuse_weights

#: Off switch for debugging and A/B benchmarks.
ENABLED = os.environ.get("ABLATE_FAST_LLAMA", "1") != "0"


def supports(model: torch.nn.Module) -> bool:
    """True when this module reproduces `model`'s forward exactly."""
    cfg = getattr(model, "config", None)
    if not ENABLED or cfg is None or type(model).__name__ != "LlamaForCausalLM":
        return False
    rope = getattr(cfg, "rope_parameters", None) or {}
    return (
        # transformers normalises half-precision activations in fp32; only fp32 matches exactly
        model.lm_head.weight.dtype == torch.float32
        and cfg.hidden_act == "silu"
        and rope.get("rope_type", "default") == "default"
        and getattr(cfg, "pretraining_tp", 1) == 1
        and not (model.training and cfg.attention_dropout)
        and not getattr(model.model, "gradient_checkpointing", False)
    )


# -- the blocks ----------------------------------------------------------------------------------


def rope_tables(w: Weights, positions: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """cos and signed sin [B, S, 1, D] for `positions` [B, S]; the sign folds transformers'
    rotate_half into a roll: rotate_half(x) * sin == roll(x, D/2) * signed_sin."""
    freqs = positions[..., None].float() * w.inv_freq.float()  # [B, S, D/2]
    cos = freqs.cos() * w.rope_scaling
    sin = freqs.sin() * w.rope_scaling
    cos = torch.cat([cos, cos], -1)
    signed_sin = torch.cat([-sin, sin], -1)
    return cos.to(dtype)[:, :, None], signed_sin.to(dtype)[:, :, None]


def rotate(x: Tensor, cos: Tensor, signed_sin: Tensor) -> Tensor:
    """RoPE on x [B, S, H, D]."""
    return x * cos + x.roll(x.shape[-1] // 2, -1) * signed_sin


class PrefixKV:
    """Keys/values of a shared prompt prefix [B, Hk, W, D], extended by the rows' own."""

    def __init__(self, keys: Tensor, values: Tensor) -> None:
        self.keys, self.values = keys, values

    def attend(self, q: Tensor, k: Tensor, v: Tensor, bias: Tensor, g: Weights) -> Tensor:
        keys, values = torch.cat([self.keys, k], 2), torch.cat([self.values, v], 2)
        return sdpa(q, keys, values, bias, g)


def sdpa(q: Tensor, keys: Tensor, values: Tensor, bias: Tensor, g: Weights) -> Tensor:
    return F.scaled_dot_product_attention(
        q, keys, values, attn_mask=bias, scale=g.head_dim**-0.5, enable_gqa=g.heads != g.kv_heads
    )


def attention_inputs(
    h: Tensor, w: Layer, g: Weights, cos: Tensor, sin: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """q, k (rotated) and v, each [B, S, heads, D], from the normed hidden states h [B, S, d]."""
    b, s, _ = h.shape
    if len(w.qkv) == 1:
        qkv = F.linear(h, w.qkv[0], w.qkv_bias[0]).view(b, s, -1, g.head_dim)
        qk = rotate(qkv[:, :, : g.heads + g.kv_heads], cos, sin)  # one pass for q and k
        return qk[:, :, : g.heads], qk[:, :, g.heads :], qkv[:, :, g.heads + g.kv_heads :]
    q, k, v = (
        F.linear(h, weight, bias).view(b, s, -1, g.head_dim)
        for weight, bias in zip(w.qkv, w.qkv_bias, strict=True)
    )
    return rotate(q, cos, sin), rotate(k, cos, sin), v


def mlp(h: Tensor, w: Layer) -> Tensor:
    if len(w.gate_up) == 1:
        gate, up = F.linear(h, w.gate_up[0], w.gate_up_bias[0]).chunk(2, -1)
    else:
        gate, up = (
            F.linear(h, weight, bias)
            for weight, bias in zip(w.gate_up, w.gate_up_bias, strict=True)
        )
    return F.linear(F.silu(gate) * up, w.down, w.down_bias)


@dataclass(frozen=True)
class Packing:
    """The positions of a [B, S] batch that matter, laid out flat ([N], row by row): token-wise
    work (projections, MLP, norms) runs on those only, attention in the [B, S] layout. Each
    packed row's values equal the padded batch's (row-wise kernels); padding costs nothing."""

    index: Tensor  # [N] positions in the flattened [B * S]
    rows: int
    steps: int

    @classmethod
    def of(cls, mask: Tensor) -> Packing:
        """The True positions of `mask` [B, S]."""
        return cls(mask.flatten().nonzero().flatten(), mask.shape[0], mask.shape[1])

    def pack(self, x: Tensor) -> Tensor:
        """[B, S, ...] → [N, ...]."""
        return x.reshape(self.rows * self.steps, *x.shape[2:]).index_select(0, self.index)

    def pad(self, x: Tensor) -> Tensor:
        """[N, ...] → [B, S, ...], zeros at the positions left out."""
        out = x.new_zeros((self.rows * self.steps, *x.shape[1:])).index_copy(0, self.index, x)
        return out.view(self.rows, self.steps, *x.shape[1:])


def layer_forward(
    x: Tensor,
    w: Layer,
    g: Weights,
    cos: Tensor,
    sin: Tensor,
    bias: Tensor | None,
    past,
    packing: Packing | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """x [B, S, d] (packed: [1, N, d]) → (x of the same shape, this layer's new keys and
    values [B, Hk, S, D])."""
    b, s, d = x.shape
    q, k, v = attention_inputs(F.rms_norm(x, (d,), w.ln1, g.eps), w, g, cos, sin)
    if packing is not None:
        q, k, v = (packing.pad(t[0]) for t in (q, k, v))
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    attn = sdpa(q, k, v, bias, g) if past is None else past.attend(q, k, v, bias, g)
    attn = attn.transpose(1, 2)
    if packing is not None:
        attn = packing.pack(attn)[None]
    x = x + F.linear(attn.reshape(b, s, -1), w.o, w.o_bias)
    return x + mlp(F.rms_norm(x, (d,), w.ln2, g.eps), w), k, v


def run_layers(
    g: Weights,
    ids: Tensor,
    rope: tuple[Tensor, Tensor],
    bias: Tensor | None,
    pasts=None,
    packing: Packing | None = None,
) -> tuple[Tensor, list[tuple[Tensor, Tensor]]]:
    """Final-normed hidden states [B, S, d] of `ids` [B, S] (packed: [1, N]) and every
    layer's new keys/values; `rope`: `rope_tables` of the tokens' positions."""
    x = F.embedding(ids, g.embed, g.padding_idx)
    cos, sin = rope
    kvs = []
    for i, layer in enumerate(g.layers):
        past = None if pasts is None else pasts[i]
        x, k, v = layer_forward(x, layer, g, cos, sin, bias, past, packing)
        kvs.append((k, v))
    return F.rms_norm(x, (x.shape[-1],), g.norm, g.eps), kvs


# -- masks (additive: 0 where visible, the dtype's minimum where not) -----------------------------


def _additive(visible: Tensor, dtype: torch.dtype) -> Tensor:
    blocked = torch.zeros(visible.shape, dtype=dtype, device=visible.device)
    return blocked.masked_fill_(~visible, torch.finfo(dtype).min)


def prompt_bias(prompt_mask: Tensor, dtype: torch.dtype) -> Tensor:
    """[U, 1, W, W]: causal over left-padded prompts, padding never visible. A padding query
    sees nothing (uniform over masked keys, finite, and its output is never used)."""
    width = prompt_mask.shape[1]
    causal = torch.ones((width, width), dtype=torch.bool, device=prompt_mask.device).tril()
    return _additive(causal[None] & prompt_mask.bool()[:, None, :], dtype)[:, None]


def continuation_bias(prompt_mask: Tensor, steps: int, dtype: torch.dtype) -> Tensor:
    """[B, 1, S, W + S]: the prompt's real tokens, then the continuation causally."""
    batch, width = prompt_mask.shape
    device = prompt_mask.device
    prompt = prompt_mask.bool()[:, None, :].expand(batch, steps, width)
    causal = torch.ones((steps, steps), dtype=torch.bool, device=device).tril()
    return _additive(torch.cat([prompt, causal.expand(batch, -1, -1)], -1), dtype)[:, None]


def continuation_positions(prompt_mask: Tensor, steps: int) -> Tensor:
    """[B, S]: the continuation's positions, counting only the prompt's real tokens."""
    start = prompt_mask.sum(-1, keepdim=True)
    return start + torch.arange(steps, device=prompt_mask.device)


def prompt_positions(prompt_mask: Tensor) -> Tensor:
    return (prompt_mask.cumsum(-1) - 1).clamp(min=0)


# -- entry points --------------------------------------------------------------------------------


def distinct_prompts(prompt_ids: Tensor, prompt_mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(ids [U, W], mask [U, W], inverse [B]): each distinct left-padded prompt row once, and
    which of them each row is (the G rows of a group share one)."""
    rows = torch.cat([prompt_ids, prompt_mask.to(prompt_ids.dtype)], 1)
    unique, inverse = torch.unique(rows, dim=0, return_inverse=True)
    width = prompt_ids.shape[1]
    return unique[:, :width], unique[:, width:].to(prompt_mask.dtype), inverse


def completion_hidden(model, ids: Tensor, attn: Tensor, prompt_len: int) -> Tensor:
    """Final hidden states [B, T, d] at the positions that predict the completion tokens
    `ids[:, prompt_len:]` (what `out.hidden_states[-1][:, prompt_len - 1 : -1]` of
    transformers' forward holds), with one prompt pass per distinct prompt."""
    g = fuse_weights(model, fuse=not torch.is_grad_enabled())
    prompt_mask = attn[:, :prompt_len]
    u_ids, u_mask, inverse = distinct_prompts(ids[:, :prompt_len], prompt_mask)
    dtype = g.embed.dtype
    rope = rope_tables(g, prompt_positions(u_mask), dtype)
    hidden, kvs = run_layers(g, u_ids, rope, prompt_bias(u_mask, dtype))
    first = hidden[:, -1][inverse][:, None]  # left padding: the last column is the last token
    steps = ids.shape[1] - prompt_len - 1  # inputs: every completion token but the last
    if steps <= 0:
        return first
    # Measured: per-row copies of the prompt's keys/values with SDPA beat a grouped attention
    # (as the decoder uses) here; the copies' backward is one scatter-add per layer.
    pasts = [PrefixKV(k[inverse], v[inverse]) for k, v in kvs]
    bias = continuation_bias(prompt_mask, steps, dtype)
    inputs, positions = ids[:, prompt_len:-1], continuation_positions(prompt_mask, steps)
    # Ragged completions: only inputs that predict a completion token are computed (input j
    # predicts token j + 1); the rest of the [B, steps] hidden states are zeros.
    needed = attn[:, prompt_len + 1 :].bool()
    if bool(needed.all()):
        rest, _ = run_layers(g, inputs, rope_tables(g, positions, dtype), bias, pasts)
        return torch.cat([first, rest], 1)
    if not bool(needed.any()):
        return torch.cat([first, first.new_zeros((first.shape[0], steps, first.shape[2]))], 1)
    packing = Packing.of(needed)
    rope = rope_tables(g, packing.pack(positions)[None], dtype)
    rest, _ = run_layers(g, packing.pack(inputs)[None], rope, bias, pasts, packing)
    return torch.cat([first, packing.pad(rest[0])], 1)


def logits_from_hidden(model, hidden: Tensor) -> Tensor:
    head = model.lm_head
    return F.linear(hidden, head.weight, head.bias)


class Decoder:
    """Incremental decoding of n samples per prompt: one prefill per prompt whose keys/values
    all n samples attend to (`SharedPrefixKV`), then one token per `step`; `select` drops
    finished rows (ragged decoding)."""

    can_select = True

    def __init__(self, model, prompt_ids: Tensor, prompt_mask: Tensor, n: int, steps: int):
        """`prompt_ids`/`prompt_mask` [P, W] (left padded), each sampled `n` times."""
        self.model, self.weights = model, fuse_weights(model)
        g, dtype = self.weights, self.weights.embed.dtype
        rope = rope_tables(g, prompt_positions(prompt_mask), dtype)
        hidden, kvs = run_layers(g, prompt_ids, rope, prompt_bias(prompt_mask, dtype))
        capacity = prompt_ids.shape[1] + steps
        # every position a step can reach, computed once: a step only indexes it
        cos, sin = rope_tables(g, torch.arange(capacity, device=prompt_ids.device)[None], dtype)
        self.cos, self.sin = cos[0], sin[0]  # [capacity, 1, D]
        visible_prompt = _additive(prompt_mask.bool(), dtype)[:, None, None, :]  # [P, 1, 1, W]
        self.caches = [SharedPrefixKV(k, v, visible_prompt, n, steps) for k, v in kvs]
        self.first_logits = logits_from_hidden(model, hidden[:, -1]).repeat_interleave(n, 0)
        self.start = prompt_mask.sum(-1, keepdim=True).repeat_interleave(n, 0)  # [B, 1]
        self.steps = steps
        self.rows = torch.arange(prompt_ids.shape[0] * n, device=prompt_ids.device)

    def select(self, keep: Tensor) -> None:
        """Decode only the current batch's rows at positions `keep` (ascending) from now on."""
        self.rows, self.start = self.rows[keep], self.start[keep]
        for cache in self.caches:
            cache.select(keep, self.rows)

    def step(self, token: Tensor, generated: int) -> Tensor:
        """Logits [rows, V] after feeding `token` [rows] (the rows `select` kept, all at first),
        the `generated`-th new token (1-based)."""
        if generated > self.steps:
            raise RuntimeError(f"KV cache capacity exceeded: built for {self.steps} new tokens")
        position = self.start + generated - 1  # [B, 1]
        rope = (self.cos[position], self.sin[position])
        hidden, _ = run_layers(self.weights, token[:, None], rope, None, self.caches)
        return logits_from_hidden(self.model, hidden[:, -1])
