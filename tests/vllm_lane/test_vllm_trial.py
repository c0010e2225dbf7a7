"""Trials on the real engine (vLLM's CPU build): a GRPO trial samples with vLLM, syncs the
weights after every update, logs the engine's distance from the trainer as the off-policy
diagnostics, and replays bit for bit; and a study runs end to end through `ablate run`."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.factors.algorithms import Algorithm
from ablate.factors.eval_spec import EvalSpec
from ablate.factors.spec import Budget, TrialSpec
from ablate.rollout.vllm_settings import LOGPROB_TOL
from ablate.tracking import MemoryTracker
from ablate.trial import train

pytestmark = pytest.mark.vllm

ROOT = Path(__file__).resolve().parents[2]


def _trial(**fields) -> TrialSpec:
    return TrialSpec(
        algorithm=Algorithm(**fields),
        model="rl_ready",
        engine="vllm",
        seed=1,
        budget=Budget(max_steps=3, prompts_per_step=4, group_size=4, max_new_tokens=24),
        eval=EvalSpec(max_problems=8, n_samples=2, ks=(1,)),
    )


def _steps(tracker: MemoryTracker) -> list[dict[str, float]]:
    return [m for _, m in tracker.metrics if "perf/step_seconds" in m]


def test_a_vllm_trial_logs_the_engines_distance_and_replays_exactly(vllm_module):
    spec = _trial(rollout_correction="token_truncate")
    first, again = MemoryTracker(), MemoryTracker()
    assert train(spec, tracker=first).outcome == "finished"
    assert train(spec, tracker=again).outcome == "finished"  # the engine reused, re-synced
    steps = _steps(first)
    assert len(steps) == 3
    for m in steps:  # the trainer recomputed the old log-probs; the engine kept its contract
        assert 0 <= m["offpolicy/logp_diff_max"] <= LOGPROB_TOL
        # tokens past the off-policy stage's 1e-4: 0 measured, so the inert check calls TIS
        # inert here (bf16 rollouts move 20-30% of the tokens past it)
        assert m["offpolicy/mismatched_frac"] <= 0.001
        assert "entropy/mean" not in m  # vLLM reports none: absent, never NaN
    drop = {"perf/", "budget/wall_seconds"}
    same = [{k: v for k, v in m.items() if not k.startswith(tuple(drop))} for m in steps]
    replay = [{k: v for k, v in m.items() if not k.startswith(tuple(drop))} for m in _steps(again)]
    assert same == replay


def test_a_study_with_a_vllm_arm_runs_end_to_end_through_ablate_run(vllm_module, tmp_path):
    """A one-seed A/A of GRPO on both engines, 3 steps: trained, tracked and reported."""
    study = tmp_path / "engine_smoke.py"
    study.write_text(
        "from ablate.study import Budget, EvalSpec, Study, arm\n"
        "STUDY = Study(name='engine_smoke', base_models=['rl_ready'], seeds=[0], passk=None,\n"
        "    arms=[arm('grpo_hf', 'grpo'), arm('grpo_vllm', 'grpo', engine='vllm')],\n"
        "    budget=Budget(max_steps=3, prompts_per_step=4, group_size=4, max_new_tokens=24),\n"
        "    eval=EvalSpec(max_problems=16, n_samples=2, ks=(1,)))\n"
    )
    results, out = tmp_path / "results", tmp_path / "reports"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "ablate.commands.cli",
            "run",
            str(study),
            "--results",
            str(results),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "INFO" not in run.stdout + run.stderr  # vLLM's own log stays at warnings
    tables = out / "engine_smoke" / "tables"
    assert (out / "engine_smoke" / "report.md").exists()
    configuration = (tables / "configuration.md").read_text()
    assert "| grpo_vllm | engine='vllm', same algorithm |" in configuration
    with open(tables / "offpolicy_diagnostics.csv") as f:
        (row,) = csv.DictReader(f)  # the vLLM arm's distance from the trainer, as measured
    assert row["arm"] == "grpo_vllm" and float(row["|Δ log p| max"]) <= LOGPROB_TOL
