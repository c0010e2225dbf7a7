"""Masked reductions over [B, T] token tensors, shared by the loss stages and the surrogates.

`mask` is 1 on a completion's real tokens and 0 on padding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import Tensor

#: The log-ratio is clamped before exp (as verl does): beyond e^±20 the clip has long bound,
#: and an overflowing exp would turn the unselected branch's gradient into NaN.
LOG_RATIO_LIMIT = 20.0


def masked_sum(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    return (x * mask).sum() if dim is None else (x * mask).sum(dim)


def masked_mean(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Mean over the masked entries; 0 where there are none (never NaN)."""
    count = mask.sum() if dim is None else mask.sum(dim)
    return masked_sum(x, mask, dim) / count.clamp(min=1)
