"""Data-side factors: dynamic-sampling group filter, overlong filtering, soft overlong punishment.

Pure tensor functions; the trainer decides when to call them.
"""

from __future__ import annotations

import torch
from torch import Tensor


def informative_groups(rewards: Tensor, group_size: int) -> Tensor:
    """DAPO dynamic sampling: bool [n_groups], True where the group's rewards are not all equal
    (all-correct and all-wrong groups have zero advantage and carry no gradient)."""
    if rewards.ndim != 1 or group_size < 1 or rewards.numel() % group_size:
        raise ValueError(f"{tuple(rewards.shape)} rewards do not split into groups of {group_size}")
    grouped = rewards.reshape(-1, group_size)
    return (grouped != grouped[:, :1]).any(dim=1)


def expand_groups(keep_groups: Tensor, group_size: int) -> Tensor:
    """Group-level bool [n] → sample-level bool [n·G]."""
    return keep_groups.repeat_interleave(group_size)


def mask_truncated(mask: Tensor, truncated: Tensor) -> Tensor:
    """Overlong filtering: zero the loss mask [B, T] of truncated completions (bool [B])."""
    return mask * (~truncated.bool()).to(mask.dtype).unsqueeze(-1)


def soft_overlong_penalty(lengths: Tensor, max_len: int, buffer: int, penalty: float) -> Tensor:
    """DAPO Eq. 13, scaled by `penalty`: 0 up to max_len - buffer, then linear down to -penalty
    at max_len, and -penalty beyond. lengths [B] → reward adjustment [B] (float)."""
    if buffer <= 0:
        return torch.zeros(lengths.shape, dtype=torch.float32)
    if buffer > max_len:
        raise ValueError(f"overlong buffer {buffer} exceeds the max length {max_len}")
    expected = max_len - buffer
    excess = (lengths.float() - expected).clamp(min=0.0)
    return -penalty * (excess / buffer).clamp(max=1.0)
