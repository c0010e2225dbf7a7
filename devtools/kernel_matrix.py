"""The test suite under the float kernels other CPUs would pick, on this machine.

    python -m devtools kernel-matrix [--sets native,intel-avx2,amd-zen,generic] [-- PYTEST ARGS]

CI lands on AMD and Intel machines of one kind. A float result that is not exactly determined (a
root finder's stopping point, a sum whose order a BLAS kernel chooses) can differ between them,
and a test that asserts it exactly passes on one CPU and fails on the other. Three libraries pick
their kernels at run time, and each can be told to pick another CPU's:

- torch: its CPU dispatch level (`ATEN_CPU_CAPABILITY`: default, avx2, avx512);
- OpenBLAS (numpy's and scipy's matmuls): its core type (`OPENBLAS_CORETYPE`: Haswell, Zen,
  SkylakeX, Prescott, ...);
- numpy's own SIMD loops: its dispatch targets above a level switched off
  (`NPY_DISABLE_CPU_FEATURES`; numpy 2.4 names them X86_V3, X86_V4, AVX512_ICL, AVX512_SPR).

Each set runs the given pytest selection (default: the fast suite, as `make test`) in its own
process and the tool prints one line per set. The golden traces are keyed by torch's dispatch
level, so under another level they are checked within the cross-platform tolerance, as on a CPU
that never recorded them. Runs take as long as the suite, one set after the other.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from typing import NamedTuple

FAST = ["-m", "not slow and not gpu and not browser and not slurm", "-q", "-p", "no:cacheprovider"]


class KernelSet(NamedTuple):
    torch: str | None  # ATEN_CPU_CAPABILITY; None: the machine's own
    openblas: str | None  # OPENBLAS_CORETYPE
    numpy_up_to: str | None  # highest numpy dispatch target kept; None: all


#: Kernel sets that stand for the CPUs CI may land on (all run on this machine's AVX512 cores).
KERNEL_SETS: dict[str, KernelSet] = {
    "native": KernelSet(None, None, None),
    "intel-avx2": KernelSet("avx2", "Haswell", "X86_V3"),
    "amd-zen": KernelSet("avx2", "Zen", "X86_V3"),
    "intel-avx512": KernelSet("avx512", "SkylakeX", "X86_V4"),
    "generic": KernelSet("default", "Prescott", "X86_V2"),
}


def numpy_disabled(up_to: str | None, dispatch: list[str], present: dict[str, bool]) -> list[str]:
    """numpy's dispatch targets above `up_to` that this CPU has (disabling an absent one is an
    error in numpy); `dispatch` is numpy's list, lowest first. A baseline `up_to` (not in the
    list) switches every target off."""
    if up_to is None:
        return []
    above = dispatch[dispatch.index(up_to) + 1 :] if up_to in dispatch else dispatch
    return [name for name in above if present.get(name, False)]


KNOBS = ("ATEN_CPU_CAPABILITY", "OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES")


def kernel_env(kernels: KernelSet, base: dict[str, str]) -> dict[str, str]:
    """`base` with the three libraries told to pick `kernels` ("native": the knobs removed).
    numpy's switched-off targets add to any `base` already switches off: this process's numpy
    no longer lists those as present."""
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    env = {k: v for k, v in base.items() if k not in KNOBS}
    if kernels.torch:
        env["ATEN_CPU_CAPABILITY"] = kernels.torch
    if kernels.openblas:
        env["OPENBLAS_CORETYPE"] = kernels.openblas
    if kernels.numpy_up_to is None:
        return env
    off = numpy_disabled(kernels.numpy_up_to, list(__cpu_dispatch__), dict(__cpu_features__))
    already = base.get("NPY_DISABLE_CPU_FEATURES", "").replace(",", " ").split()
    if off or already:
        env["NPY_DISABLE_CPU_FEATURES"] = " ".join(dict.fromkeys([*already, *off]))
    return env


PROBE = (
    "import torch, numpy\n"
    "from numpy._core._multiarray_umath import __cpu_dispatch__ as d, __cpu_features__ as f\n"
    "print(torch.backends.cpu.get_cpu_capability(), ','.join(x for x in d if f[x]) or '-')\n"
)


def probe(kernels: KernelSet) -> str:
    """What a child process under `kernels` reports: torch's level and numpy's live targets."""
    env = kernel_env(kernels, dict(os.environ))
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True)
    return done.stdout.strip() or done.stderr.strip().splitlines()[-1]


def run_set(name: str, pytest_args: list[str]) -> tuple[int, str, float]:
    env = kernel_env(KERNEL_SETS[name], {**os.environ, "OMP_NUM_THREADS": "1"})
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *pytest_args], env=env, capture_output=True, text=True
    )
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    failed = [line for line in lines if line.startswith(("FAILED", "ERROR"))]
    summary = "\n    ".join([*(failed[:20]), lines[-1] if lines else done.stderr.strip()])
    return done.returncode, summary, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools kernel-matrix", description=__doc__)
    parser.add_argument("--sets", default="native,intel-avx2,amd-zen,generic")
    parser.add_argument("pytest_args", nargs="*", help="after --: pytest's (default: fast suite)")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.sets.split(",") if n.strip()]
    unknown = [n for n in names if n not in KERNEL_SETS]
    if unknown:
        parser.error(f"unknown kernel set(s) {unknown}; choose among {', '.join(KERNEL_SETS)}")
    worst = 0
    for name in names:
        print(f"{name:<13} kernels: {probe(KERNEL_SETS[name])}", flush=True)
        rc, summary, seconds = run_set(name, args.pytest_args or FAST)
        print(f"{name:<13} rc {rc} in {seconds:.0f} s: {summary}", flush=True)
        worst = max(worst, rc)
    return worst
