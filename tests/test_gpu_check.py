"""`make gpu-check` off a GPU: it says what it would run and exits 0; the dispatcher picks the
vLLM check or, without vLLM, the CUDA check; both checks, run on the CPU (`HFEngine` standing in
for vLLM, the CPU for cuda), exercise every part and write their reports."""

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


# -- the dispatcher (`python -m devtools gpu-check`) and the CUDA check without vLLM ------------


def test_the_check_chosen_follows_the_machine():
    from devtools.bench import gpu_check

    assert gpu_check.choose(cuda=False, vllm=True) == "none"
    assert gpu_check.choose(cuda=True, vllm=True) == "vllm"
    assert gpu_check.choose(cuda=True, vllm=False) == "cuda"


def test_dry_run_through_the_devtools_entry_point_says_what_it_would_run(monkeypatch, capsys):
    from devtools import __main__ as devtools_main
    from devtools.bench import gpu_check, gpu_cuda

    def ran(*_):
        raise AssertionError("a dry run ran a check")

    monkeypatch.setattr(gpu_cuda, "run", ran)
    monkeypatch.setattr(gpu, "main", ran)
    monkeypatch.setattr(gpu_check, "cuda_available", lambda: True)  # even on a GPU: nothing
    assert devtools_main.main(["gpu-check", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "runs the CUDA check" in out or "runs the vLLM check" in out


@pytest.mark.parametrize(("cuda", "vllm", "ran"), [(False, False, None), (True, False, "cuda")])
def test_the_dispatcher_runs_the_check_the_machine_allows(monkeypatch, capsys, cuda, vllm, ran):
    from devtools.bench import gpu_check, gpu_cuda

    calls = []
    monkeypatch.setattr(gpu_check, "cuda_available", lambda: cuda)
    monkeypatch.setattr(gpu_check, "has_vllm", lambda: vllm)
    monkeypatch.setattr(gpu_cuda, "run", lambda out, options: calls.append(("cuda", options)) or 0)
    monkeypatch.setattr(gpu, "main", lambda argv: calls.append(("vllm", argv)) or 0)
    assert gpu_check.main(["--steps", "5"]) == 0
    out = capsys.readouterr().out
    if ran is None:
        assert calls == [] and "needs a CUDA GPU" in out
        assert "without vLLM (as here): the CUDA check" in out and "with vLLM: the vLLM" in out
    else:
        assert calls == [("cuda", gpu_cuda.Options(steps=5))]


def test_with_vllm_the_dispatcher_runs_todays_vllm_check(monkeypatch):
    from devtools.bench import gpu_check

    calls = []
    monkeypatch.setattr(gpu_check, "cuda_available", lambda: True)
    monkeypatch.setattr(gpu_check, "has_vllm", lambda: True)
    monkeypatch.setattr(gpu, "main", lambda argv: calls.append(argv) or 0)
    assert gpu_check.main(["--out", "x", "--repeats", "2"]) == 0
    assert calls == [["--out", "x", "--steps", "20", "--repeats", "2"]]


@pytest.mark.skipif(
    shutil.which("make") is None or shutil.which("nvidia-smi") is not None,
    reason="checks make test-gpu on a machine without a GPU",
)
def test_make_test_gpu_without_a_gpu_says_it_tested_nothing():
    done = subprocess.run(
        ["make", "-s", "test-gpu"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and "no GPU test was run" in done.stdout
    assert "passed" not in done.stdout  # pytest never ran


@pytest.mark.skipif(not zoo_model_built("rl_ready"), reason="zoo not available")
def test_the_cuda_check_runs_end_to_end_on_the_cpu(tmp_path, capsys):
    import warnings

    from ablate.models import zoo_path
    from devtools.bench import gpu_cuda

    options = gpu_cuda.Options(steps=2, cpu_steps=1, repeats=1, shapes=((2, 2),))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # bf16 autocast asks for CUDA: a no-op on the CPU
        results, checks = gpu_cuda.run_check({"rl_ready": zoo_path("rl_ready")}, options, "cpu")
    assert [c.name for c in checks] == [
        "rl_ready: CUDA vs CPU forward and packed update",
        "rl_ready: engine vs trainer log-probs",
        "rl_ready: 2 GRPO steps on cpu",
    ]
    assert all(c.passed for c in checks), checks
    r = results["rl_ready"]
    assert r["parity"]["fp32 logp max abs"] == 0  # a device against itself
    assert r["engine_logprobs"]["mean_abs"] <= gpu_cuda.ENGINE_LOGP_MEAN_ABS
    assert set(r["tokens_per_second"]["2x2"]) == {"cuda", "cpu"}
    assert all(v > 0 for v in r["step_seconds"].values())
    assert gpu_cuda.write(results, checks, {"GPU": "none (test)"}, options, tmp_path) == 0
    md = (tmp_path / "cuda_check.md").read_text()
    assert "| rl_ready | 2x2 |" in md and "2 steps on cuda, 1 on the CPU" in md
    saved = json.loads((tmp_path / "cuda_check.json").read_text())
    assert len(saved["checks"]) == 3 and "rl_ready" in saved
