"""Decode-loop helpers for `HFEngine`: a KV cache whose layers write into buffers allocated
once (instead of `torch.cat` per token), and per-step attention masks sliced from one tensor
(instead of rebuilding a causal mask from a 2D mask at every step).

The cache is still the model's own `DynamicCache` object (same layer types, same interface):
only its plain full-attention layers are swapped for `PreallocatedLayer`, so any other layer
kind (sliding window, linear attention) keeps transformers' own implementation.
"""

from __future__ import annotations

import torch
from torch import Tensor
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

#: Attention implementations that take a 4D additive float mask as is.
_ADDITIVE_MASK_IMPLEMENTATIONS = ("sdpa", "eager")


class PreallocatedLayer(DynamicLayer):
    """A `DynamicLayer` that writes keys/values into [B, H, capacity, D] buffers and returns
    views of the filled part: O(1) work per token instead of a growing copy."""

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity = capacity
        self.filled = 0

    def lazy_initialization(self, key_states: Tensor, value_states: Tensor) -> None:
        batch, heads, _, key_dim = key_states.shape
        self.device = key_states.device
        self._keys = key_states.new_empty((batch, heads, self.capacity, key_dim))
        self._values = value_states.new_empty((batch, heads, self.capacity, value_states.shape[-1]))
        self.keys, self.values = self._keys[:, :, :0], self._values[:, :, :0]
        self.is_initialized = True

    def update(self, key_states: Tensor, value_states: Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        end = self.filled + key_states.shape[-2]
        if end > self.capacity:
            raise RuntimeError(f"KV cache capacity {self.capacity} exceeded ({end} tokens)")
        self._keys[:, :, self.filled : end] = key_states
        self._values[:, :, self.filled : end] = value_states
        self.filled = end
        self.keys, self.values = self._keys[:, :, :end], self._values[:, :, :end]
        return self.keys, self.values

    def reset(self) -> None:
        self.filled = 0
        super().reset()

    def select(self, keep: Tensor) -> None:
        """Keep only the batch rows at positions `keep` (their filled part copied)."""
        if not self.is_initialized:
            return
        self._keys = _copy_rows(self._keys, keep, self.filled)
        self._values = _copy_rows(self._values, keep, self.filled)
        self.keys, self.values = self._keys[:, :, : self.filled], self._values[:, :, : self.filled]


def _copy_rows(buffer: Tensor, keep: Tensor, filled: int) -> Tensor:
    out = buffer.new_empty((keep.numel(), *buffer.shape[1:]))
    out[:, :, :filled] = buffer[keep, :, :filled]
    return out


def preallocated_cache(config, capacity: int) -> DynamicCache:
    """The model's `DynamicCache` with its full-attention layers preallocated to `capacity`."""
    cache = DynamicCache(config=config)
    cache.layers = [
        PreallocatedLayer(capacity) if type(layer) is DynamicLayer else layer
        for layer in cache.layers
    ]
    return cache


class DecodeMasks:
    """Attention masks of the decode steps: prompt padding masked, every generated position
    visible (finished rows keep decoding padding; their outputs are discarded)."""

    def __init__(self, prompt_mask: Tensor, steps: int, dtype: torch.dtype, implementation: str):
        batch, width = prompt_mask.shape
        self.width = width
        self.binary = torch.ones(
            (batch, width + steps), dtype=torch.long, device=prompt_mask.device
        )
        self.binary[:, :width] = prompt_mask
        self.additive = None
        if implementation in _ADDITIVE_MASK_IMPLEMENTATIONS:
            blocked = torch.finfo(dtype).min
            additive = torch.zeros(
                (batch, 1, 1, width + steps), dtype=dtype, device=prompt_mask.device
            )
            self.additive = additive.masked_fill((self.binary == 0)[:, None, None, :], blocked)

    def select(self, keep: Tensor) -> None:
        """Keep only the batch rows at positions `keep`."""
        self.binary = self.binary[keep]
        self.additive = None if self.additive is None else self.additive[keep]

    def prefill(self) -> Tensor:
        """The 2D prompt mask: transformers combines it with the causal mask itself."""
        return self.binary[:, : self.width]

    def step(self, generated: int) -> Tensor:
        """The mask for the query at the `generated`-th new token (keys: prompt + generated)."""
        length = self.width + generated
        if self.additive is not None:
            return self.additive[..., :length]
        return self.binary[:, :length]


class TransformersDecoder:
    """Incremental decoding through the model's own forward over a preallocated cache: the
    first logits [B, V], then one token per `step`; `select` drops finished rows (ragged
    decoding; any cache layer that is not preallocated makes it a no-op)."""

    def __init__(self, model, prompt_ids: Tensor, prompt_mask: Tensor, steps: int) -> None:
        self.model = model
        dtype = next(model.parameters()).dtype
        attention_kind = getattr(model.config, "_attn_implementation", None) or "eager"
        self.masks = DecodeMasks(prompt_mask, steps, dtype, attention_kind)
        self.prompt_len = prompt_mask.sum(-1)
        out = model(
            input_ids=prompt_ids,
            attention_mask=self.masks.prefill(),
            position_ids=(self.masks.prefill().cumsum(-1) - 1).clamp(min=0),
            cache=preallocated_cache(model.config, prompt_ids.shape[1] + steps),
            use_cache=True,
            logits_to_keep=1,
        )
        self.cache = out.cache
        self.first_logits = out.logits[:, -1]
        self.can_select = all(isinstance(layer, PreallocatedLayer) for layer in self.cache.layers)

    def select(self, keep: Tensor) -> None:
        if not self.can_select:
            return
        for layer in self.cache.layers:
            layer.select(keep)
        self.masks.select(keep)
        self.prompt_len = self.prompt_len[keep]

    def step(self, token: Tensor, generated: int) -> Tensor:
        """Logits [rows, V] after feeding `token` [rows], the `generated`-th new token."""
        out = self.model(
            input_ids=token[:, None],
            attention_mask=self.masks.step(generated),
            position_ids=(self.prompt_len + generated - 1)[:, None],
            cache=self.cache,
            use_cache=True,
        )
        return out.logits[:, -1]
