"""Golden metric traces: a short trial of every preset on the RL-ready zoo rung, every
non-timing metric at every step, must reproduce bit for bit what the code produced when the
trace was recorded. Refactors of the step (sampling, shaping, advantage estimation, the update
loop) must not change a single bit of behaviour; a change that means to (a fixed bug) records
the traces again and says why in its commit:

    ABLATE_RECORD_GOLDEN=1 OMP_NUM_THREADS=1 pytest tests/test_golden_traces.py

Bit-for-bit holds on one machine type with one torch build and one thread (CPU float kernels
differ between CPUs: see the zoo notes in the README); the traces were recorded on the CI
machine with `make test`'s settings."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import pytest

import ablate
from ablate.testing import zoo_model_built
from ablate.tracking import MemoryTracker
from ablate.trainer import train
from ablate.trial import Budget, EvalSpec, TrialSpec

pytestmark = [
    pytest.mark.skipif(not zoo_model_built("rl_ready"), reason="zoo not available"),
    pytest.mark.filterwarnings("ignore:ratio_level=:UserWarning"),
]

TRACES = Path(__file__).parent / "fixtures" / "golden_traces.json"
PRESETS = ("grpo", "dr_grpo", "dapo", "gspo", "ppo")
TIMING = re.compile(r"seconds|^perf/|wall")


def trace(name: str) -> list[list]:
    """[[step, {metric: float.hex()}], ...] of a 3-step trial (eval at start and end)."""
    spec = TrialSpec(
        algorithm=ablate.baseline(name),
        model="rl_ready",
        seed=0,
        budget=Budget(max_steps=3, prompts_per_step=4, group_size=4, max_new_tokens=48),
        eval=EvalSpec(max_problems=4, n_samples=2, ks=(1, 2)),
    )
    tracker = MemoryTracker()
    assert train(spec, tracker=tracker).outcome == "finished"
    return [
        [step, {k: _exact(v) for k, v in sorted(m.items()) if not TIMING.search(k)}]
        for step, m in tracker.metrics
    ]


def _exact(value: float) -> str:
    value = float(value)
    return "nan" if math.isnan(value) else value.hex()


@pytest.fixture(scope="module")
def recorded() -> dict:
    if os.environ.get("ABLATE_RECORD_GOLDEN"):
        TRACES.write_text(json.dumps({n: trace(n) for n in PRESETS}, indent=0) + "\n")
    return json.loads(TRACES.read_text())


@pytest.mark.parametrize("name", PRESETS)
def test_preset_reproduces_its_golden_trace_bit_for_bit(name, recorded):
    expected, got = recorded[name], trace(name)
    assert [s for s, _ in got] == [s for s, _ in expected]
    for (step, mine), (_, theirs) in zip(got, expected, strict=True):
        assert mine.keys() == theirs.keys(), f"step {step}: metric names changed"
        changed = {
            k: (
                float.fromhex(theirs[k]) if theirs[k] != "nan" else math.nan,
                float.fromhex(mine[k]) if mine[k] != "nan" else math.nan,
            )
            for k in mine
            if mine[k] != theirs[k]
        }
        assert not changed, f"{name} step {step}: (recorded, now) {changed}"


def test_traces_cover_learning_not_just_constants(recorded):
    """The traces would catch a change: rewards vary and the policy moves in every preset."""
    for name in PRESETS:
        losses = {m["policy/loss"] for _, m in recorded[name] if "policy/loss" in m}
        assert len(losses) == 3, name  # one distinct loss per step
        assert any(
            float.fromhex(m["reward/mean"]) > 0 for _, m in recorded[name] if "reward/mean" in m
        )
