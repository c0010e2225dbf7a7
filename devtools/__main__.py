"""`python -m devtools TOOL [ARGS]`: the one way to start a developer tool.

Each tool is a module with `main(argv) -> int | None`, imported only when it is asked for, so
that `--help` stays fast and a tool's heavy imports (torch, trl, verl) cost only its own runs.
A user error (`AblateError`, e.g. a bad option value) prints as one line and exits 2, as the
`ablate` command does.
"""

from __future__ import annotations

import importlib
import sys
from typing import NamedTuple


class Tool(NamedTuple):
    module: str
    summary: str


#: Every tool, in help order: name -> (module with `main(argv)`, one line for `--help`).
TOOLS: dict[str, Tool] = {
    "bench": Tool(
        "devtools.bench.cli",
        "step time vs TRL, rollout, FLOPs, overhead, scaling -> reports/bench/",
    ),
    "gpu-check": Tool(
        "devtools.bench.gpu_check",
        "on a GPU, within --budget-s: CUDA parity, HFEngine, a short trial, vLLM -> reports/gpu/",
    ),
    "calibrate": Tool(
        "devtools.calibration.cli", "the report's intervals, marks and power on simulated studies"
    ),
    "plan-calibration": Tool(
        "devtools.calibration.plan_calibration",
        "`ablate plan` against a known truth: its designs' promised, simulated and real power",
    ),
    "control-detection": Tool(
        "devtools.calibration.control_detection",
        "a control's detection at n seeds, simulated from a pilot's variance components",
    ),
    "curve-calibration": Tool(
        "devtools.calibration.curve_calibration",
        "the same for the compute-performance curve fits, on simulated curves",
    ),
    "preset-reach": Tool(
        "devtools.preset_reach",
        "every preset 50 steps on rl_ready: diverged?, pass@1 before/after, clipping",
    ),
    "profile-step": Tool(
        "devtools.profile_step", "where a natural-length RL step's time goes, by phase and operator"
    ),
    "verl-parity": Tool(
        "devtools.verl_parity",
        "ablate's losses and advantages against verl's code (needs verl on the path)",
    ),
    "architecture": Tool(
        "devtools.architecture",
        "the package's floors: module and package circles, imports that reach up, long modules",
    ),
    "kernel-matrix": Tool(
        "devtools.kernel_matrix",
        "the test suite under the float kernels of other CPUs (torch, OpenBLAS, numpy dispatch)",
    ),
    "arithmetic-subsets": Tool(
        "devtools.arithmetic_subsets",
        "rewrite ablate/tasks/data/arithmetic_subsets.json (the easy and hard problems)",
    ),
}


def usage() -> str:
    width = max(map(len, TOOLS))
    lines = ["usage: python -m devtools TOOL [ARGS]   (python -m devtools TOOL --help)", ""]
    lines += ["tools:"] + [f"  {name:<{width}}  {tool.summary}" for name, tool in TOOLS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from ablate.base.errors import AblateError

    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in TOOLS:
        print(f"error: no tool {name!r}; choose among {', '.join(TOOLS)}", file=sys.stderr)
        return 2
    tool = importlib.import_module(TOOLS[name].module)
    try:
        code = tool.main(rest)
    except AblateError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return int(code or 0)


if __name__ == "__main__":
    raise SystemExit(main())
