"""`make gpu-check` off a GPU: it says it needs one and exits 0; and its whole check, run on the
CPU with `HFEngine` standing in for vLLM, exercises every part and writes the report."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from ablate.testing import zoo_model_built
from devtools.bench import gpu

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the answer without a GPU")
def test_without_a_gpu_the_check_says_so_and_exits_0(tmp_path, capsys):
    assert gpu.main(["--out", str(tmp_path / "gpu")]) == 0
    assert "needs a CUDA GPU" in capsys.readouterr().out
    assert not (tmp_path / "gpu").exists()


@pytest.mark.skipif(
    shutil.which("make") is None or shutil.which("nvidia-smi") is not None,
    reason="checks make gpu-check on a machine without a GPU",
)
def test_make_gpu_check_without_a_gpu_exits_0_and_installs_nothing():
    done = subprocess.run(
        ["make", "-s", "gpu-check"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0
    assert "needs a CUDA GPU" in done.stdout and not (ROOT / ".venv-gpu").exists()


@pytest.mark.skipif(not zoo_model_built("rl_ready"), reason="zoo not available")
def test_the_check_runs_end_to_end_with_hf_standing_in_for_vllm(tmp_path, capsys):
    from ablate.models import zoo_path
    from ablate.rollout.hf import HFEngine

    options = gpu.Options(steps=2, repeats=1, shapes=((2, 2),))
    models = {"rl_ready": zoo_path("rl_ready")}
    results, checks = gpu.run_check(HFEngine, "cpu", models, options)
    assert [c.name for c in checks] == [
        "rl_ready: greedy completions",
        "rl_ready: sampled log-probs",
        "RL steps with weight sync",
        "weight sync",
    ]
    assert all(c.passed for c in checks), checks
    speed = results["rl_ready"]["throughput"]["2x2"]
    assert set(speed) == {"vllm tok/s", "generate tok/s", "hf engine tok/s"}
    assert all(v > 0 for v in speed.values())
    assert results["rl"]["engine distance per step"] == [0.0, 0.0]  # HF: exact log-probs
    assert gpu.write(results, checks, {"GPU": "none (test)"}, tmp_path) == 0
    md = (tmp_path / "gpu_check.md").read_text()
    assert "| rl_ready | 2x2 |" in md and "✅ weight sync" in md and "RL step" in md
    saved = json.loads((tmp_path / "gpu_check.json").read_text())
    assert saved["rl"]["steps"] == 2 and len(saved["checks"]) == 4
    failing = [gpu.Check("x", False, "broken")]
    assert gpu.write(results, failing, {}, tmp_path / "again") == 1
    assert "FAIL x: broken" in capsys.readouterr().out
