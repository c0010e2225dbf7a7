"""Golden metric traces: a short trial of every preset on the RL-ready zoo rung, every
non-timing metric at every step, must reproduce bit for bit what the code produced when the
trace was recorded. Refactors of the step (sampling, shaping, advantage estimation, the update
loop) must not change a single bit of behaviour; a change that means to (a fixed bug) records
the traces again and says why in its commit:

    ABLATE_RECORD_GOLDEN=1 OMP_NUM_THREADS=1 pytest tests/test_golden_traces.py

Bit-for-bit holds on one machine type with one torch build and one thread: CPU float kernels
differ between CPUs (see the zoo notes in the README). So traces are stored per platform
(`platform_key`: torch build, its CPU dispatch level and a hash of the CPU's model and flags).
Where this platform recorded the preset the check is exact; elsewhere (another platform, or a
preset recorded only on other platforms) every metric must stay within
`CROSS_PLATFORM_RTOL` of a recorded platform's trace (measured: the two platforms recorded so far
differ by at most 6e-5 relative on continuous metrics and by one token's share on the value
clip fraction), which still catches any change of behaviour larger than kernel noise."""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import re
from pathlib import Path

import pytest
import torch

import ablate
from ablate.baselines import baseline_names
from ablate.factors.eval_spec import EvalSpec
from ablate.factors.spec import Budget, TrialSpec
from ablate.testing import zoo_model_built
from ablate.tracking import MemoryTracker
from ablate.trial import train

pytestmark = [
    pytest.mark.skipif(not zoo_model_built("rl_ready"), reason="zoo not available"),
    pytest.mark.filterwarnings("ignore:ratio_level=:UserWarning"),
]

TRACES = Path(__file__).parent / "fixtures" / "golden_traces.json"
PRESETS = baseline_names()
TIMING = re.compile(r"seconds|^perf/|wall")
CROSS_PLATFORM_RTOL = 1e-3  # relative to max(|recorded|, 1)


def platform_key() -> str:
    """What decides the float kernels: torch build, its CPU dispatch level, the CPU itself."""
    cpu = platform.processor()
    try:
        info = Path("/proc/cpuinfo").read_text().splitlines()
        cpu = "|".join(sorted({line for line in info if line.startswith(("model name", "flags"))}))
    except OSError:
        pass
    digest = hashlib.sha256(cpu.encode()).hexdigest()[:12]
    return f"torch {torch.__version__} {torch.backends.cpu.get_cpu_capability()} cpu {digest}"


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


def _float(hexed: str) -> float:
    return math.nan if hexed == "nan" else float.fromhex(hexed)


@pytest.fixture(scope="module")
def platforms() -> dict[str, dict]:
    """{platform_key: {preset: trace}}; recording adds (or replaces) this platform's traces."""
    stored = json.loads(TRACES.read_text())
    if os.environ.get("ABLATE_RECORD_GOLDEN"):
        stored[platform_key()] = {n: trace(n) for n in PRESETS}
        TRACES.write_text(json.dumps(stored, indent=0, sort_keys=True) + "\n")
    return stored


def _differences(got: list, expected: list, rtol: float) -> list[str]:
    """Where two traces differ by more than `rtol` · max(|expected|, 1); rtol 0 means any bit."""
    if [s for s, _ in got] != [s for s, _ in expected]:
        return ["the steps that log metrics changed"]
    out = []
    for (step, mine), (_, theirs) in zip(got, expected, strict=True):
        if mine.keys() != theirs.keys():
            out.append(f"step {step}: metric names changed: {sorted(mine.keys() ^ theirs.keys())}")
            continue
        for k in mine:
            a, b = _float(theirs[k]), _float(mine[k])
            same = (
                mine[k] == theirs[k]
                if rtol == 0
                else math.isclose(a, b, rel_tol=0, abs_tol=rtol * max(abs(a), 1.0))
                or (math.isnan(a) and math.isnan(b))
            )
            if not same:
                out.append(f"step {step} {k}: recorded {a!r}, now {b!r}")
    return out


def references(platforms: dict[str, dict], key: str, name: str) -> tuple[dict[str, list], float]:
    """({platform: trace}, rtol) that `name`'s trace on platform `key` is checked against: this
    platform's own, bit for bit, when it recorded the preset; else every platform that did, within
    the cross-platform tolerance (a platform recorded before the preset existed has none)."""
    if name in platforms.get(key, {}):
        return {key: platforms[key][name]}, 0.0
    return {k: t[name] for k, t in platforms.items() if name in t}, CROSS_PLATFORM_RTOL


@pytest.mark.parametrize("name", PRESETS)
def test_preset_reproduces_its_golden_trace(name, platforms):
    got = trace(name)
    expected, rtol = references(platforms, platform_key(), name)
    assert expected, f"{name} has no golden trace on any platform (record it)"
    per_platform = {k: _differences(got, t, rtol) for k, t in expected.items()}
    assert any(not d for d in per_platform.values()), (
        f"{name} on {platform_key()}: "
        + ("bit for bit" if rtol == 0 else f"further than {rtol} from every recorded platform")
        + f": {per_platform}"
    )


def test_a_preset_this_platform_never_recorded_is_checked_against_the_platforms_that_did():
    platforms = {"here": {"grpo": ["g"]}, "there": {"grpo": ["g2"], "new": ["n"]}, "old": {}}
    assert references(platforms, "here", "grpo") == ({"here": ["g"]}, 0.0)
    assert references(platforms, "here", "new") == ({"there": ["n"]}, CROSS_PLATFORM_RTOL)
    assert references(platforms, "elsewhere", "grpo") == (
        {"here": ["g"], "there": ["g2"]},
        CROSS_PLATFORM_RTOL,
    )
    assert references(platforms, "here", "missing") == ({}, CROSS_PLATFORM_RTOL)


def test_differences_sees_one_bit_and_respects_the_tolerance():
    trace_a = [[1, {"m": (0.5).hex()}]]
    one_ulp = [[1, {"m": math.nextafter(0.5, 1.0).hex()}]]
    assert _differences(one_ulp, trace_a, rtol=0) and not _differences(one_ulp, trace_a, 1e-3)
    assert _differences([[1, {"m": (0.502).hex()}]], trace_a, 1e-3)
    assert _differences([[1, {"n": (0.5).hex()}]], trace_a, 1e-3)


def test_traces_cover_learning_not_just_constants(platforms):
    """The traces would catch a change: rewards vary and the policy moves in every preset."""
    untraced = [n for n in PRESETS if not any(n in t for t in platforms.values())]
    assert not untraced, f"presets without a golden trace (record them): {untraced}"
    for traces in platforms.values():
        for name in (n for n in PRESETS if n in traces):
            losses = {m["policy/loss"] for _, m in traces[name] if "policy/loss" in m}
            assert len(losses) == 3, name  # one distinct loss per step
            assert any(_float(m["reward/mean"]) > 0 for _, m in traces[name] if "reward/mean" in m)
