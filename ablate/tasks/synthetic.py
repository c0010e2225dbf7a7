"""Shared machinery of the synthetic tasks: seeded, disjoint train / eval draws."""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable
from typing import TypeVar

from ablate.base.errors import ConfigError
from ablate.base.seeding import rng as named_rng
from ablate.tasks.base import Split

T = TypeVar("T")
MAX_CONSECUTIVE_MISSES = 2000


def draw_splits(
    stream: str,
    seed: int,
    sizes: dict[Split, int],
    draw: Callable[[random.Random], T],
    key: Callable[[T], Hashable],
) -> dict[Split, list[T]]:
    """Draw `sizes[split]` distinct items per split from the named RNG stream of `seed`.

    Eval is drawn first and train skips every key eval holds, so the splits are disjoint by
    `key` (e.g. the operand multiset: `18+65+28` is not a new problem if `28+65+18` is in eval)
    and the eval set does not depend on `n_train`."""
    taken: set[Hashable] = set()
    out: dict[Split, list[T]] = {}
    for split in ("eval", "train"):
        want = sizes[split]
        if want < 0:
            raise ConfigError(f"{stream}: n_{split} must be >= 0, got {want}")
        gen = named_rng(seed, stream, split)
        items: list[T] = []
        misses = 0  # consecutive draws of a taken key: only a nearly exhausted space gets here
        while len(items) < want:
            if misses > MAX_CONSECUTIVE_MISSES:
                raise ConfigError(
                    f"{stream}: could only draw {len(items)} of n_{split}={want} distinct "
                    "problems; lower n_train / n_eval or raise the difficulty"
                )
            item = draw(gen)
            k = key(item)
            if k in taken:
                misses += 1
            else:
                misses = 0
                taken.add(k)
                items.append(item)
        out[split] = items
    return out


def extra_lines(rng: random.Random, rate: float, cap: int) -> int:
    """How many optional lines to write: each further one with probability `rate`, at most
    `cap` (a geometric count, so the corpus has a controlled mix of 0, 1, 2, ... lines)."""
    count = 0
    while count < cap and rng.random() < rate:
        count += 1
    return count
