"""The one place RNGs are seeded. Every seed in a trial derives by name from its
`TrialSpec.rng_seed` (the trial seed) or, for rollouts and mini-batch order, `rollout_seed` (an
A/A replicate's own), so two trials with the same seed share data order, sampling and evaluation
randomness (common random numbers) whatever their algorithm."""

from __future__ import annotations

import hashlib
import random
from typing import TYPE_CHECKING

import numpy as np

from ablate.base.lazy import torch

if TYPE_CHECKING:
    import torch as torch_types


def derive_seed(seed: int, *names: str) -> int:
    """A stable 63-bit seed for the stream `names` of trial seed `seed` (same on every machine)."""
    key = ":".join([str(int(seed)), *names]).encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "little") >> 1


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global RNGs (for code that uses them implicitly)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def generator(
    seed: int, *names: str, device: str | torch_types.device = "cpu"
) -> torch_types.Generator:
    """A torch.Generator for the stream `names` of `seed`."""
    g = torch.Generator(device=device)
    g.manual_seed(derive_seed(seed, *names))
    return g


def rng(seed: int, *names: str) -> random.Random:
    """A Python Random for the stream `names` of `seed` (data order, task generation)."""
    return random.Random(derive_seed(seed, *names))


def rng_states() -> dict:
    """Python's, NumPy's and torch's global RNG states (CUDA's too where torch sees a GPU): what
    `set_rng_states` puts back around code that reseeds them (vLLM's engine build)."""
    states = {"python": random.getstate(), "numpy": np.random.get_state()}
    states["torch"] = torch.get_rng_state()
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_rng_states(states: dict) -> None:
    """Restore what `rng_states` returned."""
    random.setstate(states["python"])
    np.random.set_state(states["numpy"])
    torch.set_rng_state(states["torch"])
    if "cuda" in states:
        torch.cuda.set_rng_state_all(states["cuda"])
