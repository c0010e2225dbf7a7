"""Resumable trial checkpoints that survive kills and corruption.

A trial's checkpoints live in `<run_dir>/checkpoints/step-NNNNNN/`: safetensors weights, the
optimizer, scheduler, the advantage estimator's state and every RNG state (`trainer.pt`), the
trial's counters (`state.json`), the rollout engine's state (`engine.pt`, only for an engine
that carries one: the stale or low-precision sampler of `ablate.rollout.mismatch`) and, written
last, `manifest.json` with each file's sha256. A
checkpoint is written into a temporary folder, every file fsynced, then renamed into place (and
the parent folder fsynced), so it either exists whole or not at all. The newest `KEEP`
checkpoints are kept: when the latest fails its hashes (a bad disk, a truncated copy), loading
falls back to the one before with a warning naming the file; with none valid the trial restarts
from step 0. That fall back is for a resume only (the trial trains on from what it restores):
what evaluates a finished trial's final model loads the newest checkpoint with `load_newest`,
which refuses a damaged one naming the file. A checkpoint without the engine state its trial
needs (written before the engine's state was checkpointed) is refused in one line: resuming
from it would sample from other weights than the uninterrupted trial did.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_model, save_model

from ablate.base import durable, faults
from ablate.base.errors import AblateWarning, TrialError

WEIGHTS, TRAINER, STATE, MANIFEST = "model.safetensors", "trainer.pt", "state.json", "manifest.json"
ENGINE = "engine.pt"
FOLDER = "checkpoints"
KEEP = 2


class CheckpointWarning(AblateWarning):
    """A checkpoint that could not be used; the trial resumed from an older one or step 0."""


class CorruptCheckpoint(Exception):
    """A checkpoint whose files are missing, truncated or differ from their manifest."""


def _step_dir(run_dir: Path, step: int) -> Path:
    return Path(run_dir) / FOLDER / f"step-{step:06d}"


def checkpoint_dirs(run_dir: Path) -> list[Path]:
    """The run's complete checkpoint folders (renamed into place), newest first."""
    root = Path(run_dir) / FOLDER
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and p.name.startswith("step-")]
    return sorted((p for p in found if p.name[5:].isdigit()), reverse=True)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


_fsync = durable.fsync_path


def save_checkpoint(
    run_dir: Path,
    *,
    step: int,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    state: dict[str, Any],
    estimator_state: dict[str, Any] | None = None,
    engine_state: dict[str, Any] | None = None,
) -> Path:
    """Write the checkpoint of `step` atomically, then drop all but the newest `KEEP`.
    `engine_state`: the rollout engine's `state()`, for an engine that has one (None: the
    checkpoint has no `engine.pt`, byte for byte what it was before engines had state)."""
    final = _step_dir(run_dir, step)
    tmp = final.with_name(f"{final.name}.tmp-{os.getpid()}")
    if final.parent.is_dir():  # halves of saves killed mid-write (one writer per trial: lease)
        for partial in final.parent.glob("step-*.tmp-*"):
            shutil.rmtree(partial, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        _write_files(tmp, step, model, optimizer, scheduler, state, estimator_state, engine_state)
        if final.exists():  # a rerun re-saving the same step (e.g. the final one)
            shutil.rmtree(final)
        tmp.rename(final)
        _fsync(final.parent)
    except Exception as exc:
        # safetensors and torch.save say "disk full" in types of their own: as an OSError it is
        # the store's failure (the study stops in one line), not this trial's
        disk = durable.disk_error(exc, tmp)
        shutil.rmtree(tmp, ignore_errors=True)  # a half checkpoint only takes the space
        if disk is None or disk is exc:
            raise
        raise disk from exc
    faults.point("checkpoint_renamed", step)
    for old in checkpoint_dirs(run_dir)[KEEP:]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def _write_files(
    tmp: Path, step, model, optimizer, scheduler, state, estimator_state, engine_state
) -> None:
    """Every file of the checkpoint of `step` into `tmp`, fsynced, the manifest last."""
    save_model(model, str(tmp / WEIGHTS))  # handles tied embeddings
    rngs = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    blob = {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "rng": rngs}
    # the advantage estimator's own parameters (PPO's value head: hidden_size + 1 floats)
    blob["estimator"] = estimator_state or {}
    torch.save(blob, tmp / TRAINER)
    (tmp / STATE).write_text(json.dumps(state, indent=1, sort_keys=True))
    names = [WEIGHTS, TRAINER, STATE]
    if engine_state is not None:
        torch.save(engine_state, tmp / ENGINE)  # keeps tied weights tied (safetensors refuses)
        names.append(ENGINE)
    faults.point("checkpoint_files_written", step)
    files = {name: _sha256(tmp / name) for name in names}
    (tmp / MANIFEST).write_text(json.dumps({"step": step, "sha256": files}, indent=1))
    for name in (*files, MANIFEST):
        _fsync(tmp / name)


def verify(folder: Path) -> dict[str, Any]:
    """The manifest of a checkpoint that lists every file of a checkpoint, each matching its
    hash; CorruptCheckpoint naming the first thing that does not."""
    manifest_path = folder / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text())
        hashes = manifest["sha256"]
        listed = set(hashes)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CorruptCheckpoint(f"{manifest_path}: unreadable manifest ({exc})") from None
    if missing := [name for name in (WEIGHTS, TRAINER, STATE) if name not in listed]:
        # a manifest that lists nothing would vouch for nothing: not a whole checkpoint
        raise CorruptCheckpoint(f"{manifest_path} does not list {', '.join(missing)}")
    for name, expected in hashes.items():
        path = folder / name
        if not path.is_file():
            raise CorruptCheckpoint(f"{path} is missing")
        if _sha256(path) != expected:
            raise CorruptCheckpoint(f"{path} does not match its sha256 in {MANIFEST}")
    return manifest


def _restore(folder: Path, model, optimizer, scheduler, estimator, engine) -> dict[str, Any]:
    load_model(model, str(folder / WEIGHTS))
    if engine is not None:
        engine.load_state(torch.load(folder / ENGINE, weights_only=True))
    blob = torch.load(folder / TRAINER, weights_only=False)
    if estimator is not None:
        estimator.load_state_dict(blob.get("estimator", {}))
    optimizer.load_state_dict(blob["optimizer"])
    scheduler.load_state_dict(blob["scheduler"])
    random.setstate(blob["rng"]["python"])
    np.random.set_state(blob["rng"]["numpy"])
    torch.set_rng_state(blob["rng"]["torch"])
    return json.loads((folder / STATE).read_text())


def load_latest(
    run_dir: Path,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    estimator: Any = None,
    engine: Any = None,
) -> dict[str, Any] | None:
    """Restore the newest valid checkpoint in place and return its saved state; None (start
    from step 0) when there is none. A corrupt one is skipped with a `CheckpointWarning`: what
    a resume needs, since the trial trains on from whichever it restores. `engine`: the rollout
    engine when it has a state (`state()` / `load_state()`), else None; a checkpoint without
    its state is a TrialError."""
    found = checkpoint_dirs(run_dir)
    for folder in found:
        try:
            manifest = verify(folder)
        except CorruptCheckpoint as exc:
            rest = "the previous one" if folder != found[-1] else "step 0 (no valid checkpoint)"
            warnings.warn(f"{exc}; resuming from {rest}", CheckpointWarning, stacklevel=2)
            continue
        return _restore_checked(folder, manifest, model, optimizer, scheduler, estimator, engine)
    return None


def load_newest(
    run_dir: Path,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    estimator: Any = None,
    engine: Any = None,
) -> dict[str, Any] | None:
    """Restore the newest checkpoint, and only it, in place and return its saved state; None
    when there is none. What evaluates a finished trial's final model (the recipe phase) needs
    that checkpoint and no other: a damaged one is a `CorruptCheckpoint` naming the file, never
    a fall back to an older one whose numbers would differ."""
    found = checkpoint_dirs(run_dir)
    if not found:
        return None
    manifest = verify(found[0])
    return _restore_checked(found[0], manifest, model, optimizer, scheduler, estimator, engine)


def _restore_checked(
    folder: Path, manifest: dict, model, optimizer, scheduler, estimator, engine
) -> dict[str, Any]:
    """`_restore` of a verified checkpoint, a TrialError when it does not fit the trial."""
    if engine is not None and ENGINE not in manifest["sha256"]:
        raise TrialError(
            f"{folder} holds no rollout engine state ({ENGINE}: written before stale or "
            "low-precision rollouts were checkpointed), so a resume would sample from "
            "other weights than the uninterrupted trial; rerun the trial in a fresh run_dir"
        )
    try:
        return _restore(folder, model, optimizer, scheduler, estimator, engine)
    except Exception as exc:  # intact files that do not fit this trial's model
        raise TrialError(
            f"{folder} matches its manifest but does not load into this trial's model "
            f"({type(exc).__name__}: {str(exc)[:300]}); a checkpoint of another model or "
            "version: use a fresh run_dir"
        ) from None
