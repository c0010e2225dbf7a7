"""The fused decoder's KV cache (`SharedPrefixKV`): each prompt's keys/values kept once and
shared by the n samples of its group, the samples' own keys/values apart, and ragged decoding:
`select` drops the rows that have finished so that they stop costing compute.

Dropping rows keeps every remaining row's numbers bit for bit (tested against decoding the full
batch): the shared-prompt attention still runs in the [groups, n] layout it always had (a
dropped row's slot holds zeros whose outputs are never read), the per-row parts are per-row
anyway, and callers keep at least `MIN_ROWS` rows in a batch, because BLAS picks another
(differently rounding) kernel for very short matrices: on this project's CPU, float32 rows of
`F.linear` are independent of the batch from 16 rows up for every inner size to 2048 (from 6
and 11 rows at 128 and 256), measured at one thread. With more threads the BLAS may split a
product differently by batch size, so there `select` is equal only to float rounding.
"""

from __future__ import annotations

import torch
from torch import Tensor

#: Fewest rows a compacted decode batch keeps (see the module docstring).
MIN_ROWS = 16


class SharedPrefixKV:
    """A decode cache that keeps each prompt's keys/values once ([P, Hk, W, D]) and the n
    samples' generated ones apart ([rows, Hk, steps, D], written in place). Attention runs over
    both with one softmax, so the prompt part is read once per group instead of once per row
    (decoding is memory-bound on the cache at these sizes)."""

    def __init__(self, keys: Tensor, values: Tensor, prompt_bias: Tensor, n: int, steps: int):
        prompts, heads, _, dim = keys.shape
        self.n = n
        self._all = (*_read_layout(keys, values), prompt_bias)  # prompt_bias: [P, 1, 1, W]
        self.keys, self.values, self.prompt_bias = self._all  # of the groups still decoding
        self.new_keys = keys.new_empty((prompts * n, heads, steps, dim))
        self.new_values = values.new_empty((prompts * n, heads, steps, values.shape[-1]))
        self.filled = 0
        self.slots: Tensor | None = None  # each row's place in [groups * n]; None: in order

    def attend(self, q: Tensor, k: Tensor, v: Tensor, bias, g) -> Tensor:
        """q [B, H, 1, D] of the newest token, k/v [B, Hk, 1, D] its own key/value; `g`: the
        model's `fused_weights.Weights` (for the head size)."""
        end = self.filled + k.shape[2]
        if end > self.new_keys.shape[2]:
            raise RuntimeError(f"KV cache capacity {self.new_keys.shape[2]} exceeded")
        self.new_keys[:, :, self.filled : end], self.new_values[:, :, self.filled : end] = k, v
        self.filled = end
        own = (self.new_keys[:, :, :end], self.new_values[:, :, :end])
        prefix = (self.keys, self.values, self.prompt_bias)
        return grouped_attention(q, prefix, own, self.n, g.head_dim**-0.5, self.slots)

    def select(self, keep: Tensor, rows: Tensor) -> None:
        """Keep the batch's rows at positions `keep` (ascending), whose original row numbers
        (prompt * n + sample) are `rows`: their own keys/values are copied, their prompts'
        kept, every other row and prompt dropped."""
        groups, group_of_row = torch.unique(rows // self.n, return_inverse=True)
        keys, values, bias = (t[groups] for t in self._all)
        self.keys, self.values, self.prompt_bias = (*_read_layout(keys, values), bias)
        slots = group_of_row * self.n + rows % self.n
        self.slots = None if rows.numel() == groups.numel() * self.n else slots
        self.new_keys = _copy_rows(self.new_keys, keep, self.filled)
        self.new_values = _copy_rows(self.new_values, keep, self.filled)


def _read_layout(keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
    """Prompt keys whose transpose is contiguous and contiguous values: the layouts the
    attention's matrix products read, laid out once here instead of copied at every step (the
    products then see the very tensors they copied before: the same numbers)."""
    return keys.transpose(-1, -2).contiguous().transpose(-1, -2), values.contiguous()


def _copy_rows(buffer: Tensor, keep: Tensor, filled: int) -> Tensor:
    """A buffer of the same capacity holding rows `keep` of `buffer`'s filled part."""
    out = buffer.new_empty((keep.numel(), *buffer.shape[1:]))
    out[:, :, :filled] = buffer[keep, :, :filled]
    return out


def grouped_attention(
    q: Tensor, prefix: tuple, own: tuple, n: int, scale: float, slots: Tensor | None = None
) -> Tensor:
    """Attention of the newest tokens q [rows, H, S, D] over (a) their block's prompt:
    `prefix` = keys, values [P, Hk, W, D] and an additive bias [P, 1, 1, W], shared by the
    block's n rows, and (b) all of their own keys/values `own` [rows, Hk, L, D] (every one
    visible); one softmax over both. Row r sits at `slots[r]` of the [P * n] layout (None:
    rows == P * n, in order). Equals SDPA over the concatenated keys (tested)."""
    prefix_k, prefix_v, prefix_bias = prefix
    own_k, own_v = own
    rows, heads, steps, dim = q.shape
    prompts, kv_heads, width, _ = prefix_k.shape
    shape = (prompts, n, kv_heads, heads // kv_heads * steps)
    q = q.reshape(rows, kv_heads, shape[3], dim)  # [rows, Hk, per_kv * S, D]
    grouped = _by_prompt(_to_slots(q, slots, prompts * n), shape)
    prefix_scores = grouped @ prefix_k.transpose(-1, -2) * scale + prefix_bias
    prefix_scores = _from_slots(_by_row(prefix_scores, shape), slots)
    own_scores = q @ own_k.transpose(-1, -2) * scale
    probs = torch.cat([prefix_scores, own_scores], -1).softmax(-1)
    prefix_probs = _by_prompt(_to_slots(probs[..., :width], slots, prompts * n), shape)
    out = _from_slots(_by_row(prefix_probs @ prefix_v, shape), slots)
    out = out + probs[..., width:] @ own_v  # [rows, Hk, per_kv * S, D]
    return out.reshape(rows, heads, steps, dim)


def _to_slots(x: Tensor, slots: Tensor | None, size: int) -> Tensor:
    """Rows of x placed at `slots` of a zero tensor of `size` rows (x itself when None)."""
    if slots is None:
        return x
    return x.new_zeros((size, *x.shape[1:])).index_copy_(0, slots, x)


def _from_slots(x: Tensor, slots: Tensor | None) -> Tensor:
    return x if slots is None else x[slots]


def _by_prompt(x: Tensor, shape: tuple[int, int, int, int]) -> Tensor:
    """[P * n, Hk, per_kv, X] (or [P * n, H, 1, X]) -> [P, Hk, n * per_kv, X]."""
    prompts, n, kv_heads, per_kv = shape
    grouped = x.reshape(prompts, n, kv_heads, per_kv, x.shape[-1]).transpose(1, 2)
    return grouped.reshape(prompts, kv_heads, n * per_kv, x.shape[-1])


def _by_row(x: Tensor, shape: tuple[int, int, int, int]) -> Tensor:
    """[P, Hk, n * per_kv, X] -> [P * n, Hk, per_kv, X] (inverse of `_by_prompt`)."""
    prompts, n, kv_heads, per_kv = shape
    rows = x.reshape(prompts, kv_heads, n, per_kv, x.shape[-1]).transpose(1, 2)
    return rows.reshape(prompts * n, kv_heads, per_kv, x.shape[-1])


def rows_to_keep(done: Tensor, min_rows: int = MIN_ROWS) -> Tensor | None:
    """Positions (ascending) of the rows a decode batch should keep, given which of its rows
    are `done`; None when compacting would not pay (fewer than a quarter of the rows would go).
    Every unfinished row stays, topped up with finished ones to `min_rows`."""
    size = done.numel()
    alive = ~done
    target = max(int(alive.sum()), min(min_rows, size))
    if target > size * 3 // 4:
        return None
    extra = target - int(alive.sum())
    if extra > 0:  # the first finished rows fill the batch up to min_rows
        alive = alive | (done & (done.long().cumsum(0) <= extra))
    return alive.nonzero().flatten()
