"""Resumable trial checkpoints: safetensors weights, optimizer and scheduler state, every RNG
state and the trial's counters. Written to a temporary folder and swapped in atomically, so a
run killed mid-save keeps its previous checkpoint."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_model, save_model

WEIGHTS, TRAINER, STATE = "model.safetensors", "trainer.pt", "state.json"


def save_checkpoint(
    path: Path,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    state: dict[str, Any],
    critic: torch.nn.Module | None = None,
) -> None:
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_model(model, str(tmp / WEIGHTS))  # handles tied embeddings
    rngs = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    blob = {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "rng": rngs}
    if critic is not None:  # PPO's value head (hidden_size + 1 floats: no safetensors file needed)
        blob["critic"] = critic.state_dict()
    torch.save(blob, tmp / TRAINER)
    (tmp / STATE).write_text(json.dumps(state, indent=1, sort_keys=True))
    old = path.with_name(path.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if path.exists():
        path.rename(old)
    tmp.rename(path)
    shutil.rmtree(old, ignore_errors=True)


def has_checkpoint(path: Path) -> bool:
    return (Path(path) / STATE).exists()


def load_checkpoint(
    path: Path,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    critic: torch.nn.Module | None = None,
) -> dict[str, Any]:
    """Restore weights (and the critic's), optimizer, scheduler and RNGs in place; returns the
    saved state."""
    path = Path(path)
    load_model(model, str(path / WEIGHTS))
    blob = torch.load(path / TRAINER, weights_only=False)
    if critic is not None:
        if "critic" not in blob:
            raise ValueError(f"{path} holds no critic state; it was not saved by a GAE trial")
        critic.load_state_dict(blob["critic"])
    optimizer.load_state_dict(blob["optimizer"])
    scheduler.load_state_dict(blob["scheduler"])
    random.setstate(blob["rng"]["python"])
    np.random.set_state(blob["rng"]["numpy"])
    torch.set_rng_state(blob["rng"]["torch"])
    return json.loads((path / STATE).read_text())
