"""Checkpoints: atomic, hash-checked, the previous one kept; a corrupt latest falls back to the
previous with a warning naming the file, and none valid restarts from step 0."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

from ablate.base.errors import TrialError
from ablate.stages.checkpoint import (
    ENGINE,
    MANIFEST,
    STATE,
    TRAINER,
    WEIGHTS,
    CheckpointWarning,
    checkpoint_dirs,
    load_latest,
    save_checkpoint,
)
from ablate.testing import tiny_llama


def parts(seed: int = 0):
    model = tiny_llama(seed=seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda u: 1.0)
    return model, optimizer, scheduler


def train_a_bit(model, optimizer) -> None:
    loss = sum(p.float().pow(2).sum() for p in model.parameters())
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()


def weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.fixture
def saved(tmp_path):
    """Checkpoints at steps 2, 4, 6 (only 4 and 6 kept); the weights each one holds."""
    model, optimizer, scheduler = parts()
    held = {}
    for step in (2, 4, 6):
        train_a_bit(model, optimizer)
        save_checkpoint(
            tmp_path,
            step=step,
            model=model,
            optimizer=optimizer,
            scheduler=scheduler,
            state={"step": step},
        )
        held[step] = weights(model)
    return tmp_path, held


def restore(run_dir):
    model, optimizer, scheduler = parts(seed=1)  # other weights: a restore must overwrite them
    state = load_latest(run_dir, model=model, optimizer=optimizer, scheduler=scheduler)
    return state, model


def same(model, expected) -> bool:
    return all(torch.equal(v, expected[k]) for k, v in model.state_dict().items())


def test_keeps_the_two_newest_with_a_manifest_of_hashes(saved):
    run_dir, held = saved
    assert [p.name for p in checkpoint_dirs(run_dir)] == ["step-000006", "step-000004"]
    manifest = json.loads((checkpoint_dirs(run_dir)[0] / MANIFEST).read_text())
    assert manifest["step"] == 6 and set(manifest["sha256"]) == {WEIGHTS, TRAINER, STATE}
    state, model = restore(run_dir)
    assert state == {"step": 6} and same(model, held[6])


def test_restores_rng_states(tmp_path):
    model, optimizer, scheduler = parts()
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    save_checkpoint(
        tmp_path, step=1, model=model, optimizer=optimizer, scheduler=scheduler, state={}
    )
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    restore(tmp_path)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected


@pytest.mark.parametrize("name", [WEIGHTS, TRAINER, STATE, MANIFEST])
def test_a_corrupt_latest_falls_back_to_the_previous_naming_the_file(saved, name):
    run_dir, held = saved
    bad = checkpoint_dirs(run_dir)[0] / name
    bad.write_bytes(bad.read_bytes()[: len(bad.read_bytes()) // 2])  # truncated
    with pytest.warns(CheckpointWarning, match=str(bad)) as caught:
        state, model = restore(run_dir)
    assert "previous" in str(caught[0].message)
    assert state == {"step": 4} and same(model, held[4])


@pytest.mark.parametrize("listed", [{}, {STATE: None}], ids=["no-files", "state-only"])
def test_a_manifest_listing_too_few_files_falls_back_to_the_previous(saved, listed):
    run_dir, held = saved
    latest = checkpoint_dirs(run_dir)[0]
    manifest = json.loads((latest / MANIFEST).read_text())
    kept = {name: manifest["sha256"][name] for name in listed}
    (latest / MANIFEST).write_text(json.dumps({"step": 6, "sha256": kept}))
    (latest / WEIGHTS).write_bytes(b"\0" * 64)  # what such a manifest would not catch
    with pytest.warns(CheckpointWarning, match=f"{latest / MANIFEST} does not list .*{WEIGHTS}"):
        state, model = restore(run_dir)
    assert state == {"step": 4} and same(model, held[4])


def test_none_valid_restarts_from_step_zero(saved):
    run_dir, _ = saved
    for folder in checkpoint_dirs(run_dir):
        (folder / WEIGHTS).write_bytes(b"\0" * 64)
    with pytest.warns(CheckpointWarning) as caught:
        state, _ = restore(run_dir)
    assert state is None
    assert ["previous" in str(w.message) for w in caught] == [True, False]
    assert "step 0" in str(caught[-1].message)


def test_a_save_killed_before_its_rename_leaves_the_previous_checkpoint(saved):
    run_dir, held = saved
    partial = checkpoint_dirs(run_dir)[0].with_name("step-000008.tmp-123")
    partial.mkdir()
    (partial / WEIGHTS).write_bytes(b"partial")
    state, model = restore(run_dir)
    assert state == {"step": 6} and same(model, held[6])
    model, optimizer, scheduler = parts()
    save_checkpoint(
        run_dir, step=8, model=model, optimizer=optimizer, scheduler=scheduler, state={}
    )
    assert not partial.exists()  # the next save removes what a killed one left behind


def test_intact_files_of_another_model_are_a_clear_error(saved):
    run_dir, _ = saved
    other = tiny_llama(vocab=80)
    optimizer = torch.optim.AdamW(other.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda u: 1.0)
    with pytest.raises(TrialError, match="step-000006 matches its manifest but does not load"):
        load_latest(run_dir, model=other, optimizer=optimizer, scheduler=scheduler)


class RecordingEngine:
    """A stand-in for an engine with a state: remembers what `load_state` was given."""

    def __init__(self):
        self.loaded = None

    def load_state(self, state):
        self.loaded = state


def test_an_engine_state_is_saved_hashed_and_restored_and_a_corrupt_one_falls_back(tmp_path):
    model, optimizer, scheduler = parts()
    for step in (1, 2):
        save_checkpoint(
            tmp_path,
            step=step,
            model=model,
            optimizer=optimizer,
            scheduler=scheduler,
            state={"step": step},
            engine_state={"pending": [{"w": torch.full((2,), float(step))}]},
        )
    manifest = json.loads((checkpoint_dirs(tmp_path)[0] / MANIFEST).read_text())
    assert set(manifest["sha256"]) == {WEIGHTS, TRAINER, STATE, ENGINE}
    engine = RecordingEngine()
    load_latest(tmp_path, model=model, optimizer=optimizer, scheduler=scheduler, engine=engine)
    assert torch.equal(engine.loaded["pending"][0]["w"], torch.full((2,), 2.0))
    bad = checkpoint_dirs(tmp_path)[0] / ENGINE
    bad.write_bytes(bad.read_bytes()[:10])
    with pytest.warns(CheckpointWarning, match=str(bad)):
        state = load_latest(
            tmp_path, model=model, optimizer=optimizer, scheduler=scheduler, engine=engine
        )
    assert state == {"step": 1}
    assert torch.equal(engine.loaded["pending"][0]["w"], torch.full((2,), 1.0))
