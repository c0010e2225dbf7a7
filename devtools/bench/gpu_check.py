"""`make gpu-check` (`python -m devtools gpu-check`): the check this machine can run.

- a CUDA GPU and vLLM importable: the vLLM check (`devtools.bench.gpu`: vLLM against HFEngine,
  log-prob parity, throughput, 20 RL steps with weight sync) -> reports/gpu/gpu_check.md;
- a CUDA GPU without vLLM (a lent machine: no registry, its own PyTorch): the CUDA check
  (`devtools.bench.gpu_cuda`: the trainer and HFEngine on cuda against the CPU) ->
  reports/gpu/cuda_check.md;
- no CUDA GPU: it says which it would run, checks nothing and exits 0 (`--dry-run` says the same
  anywhere, running nothing).
Importing this module imports neither torch nor vLLM: the decision costs nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

PLANS = {
    "vllm": (
        "the vLLM check: vLLM against HFEngine on rl_ready and the 4.2M size (greedy "
        "completions, sampled log-probs), tokens/s vs model.generate, 20 GRPO steps sampled by "
        "vLLM with weight sync -> reports/gpu/gpu_check.{md,json}"
    ),
    "cuda": (
        "the CUDA check: for rl_ready and the 4.2M size, the fused forward and a packed "
        "update on cuda against the CPU (fp32 and bf16 autocast), HFEngine's log-probs against "
        "the trainer's, HFEngine tokens/s and 20 GRPO steps on cuda against the same on the "
        "CPU -> reports/gpu/cuda_check.{md,json}"
    ),
}


def has_vllm() -> bool:
    return importlib.util.find_spec("vllm") is not None


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def choose(cuda: bool, vllm: bool) -> str:
    """Which check runs: "vllm", "cuda", or "none" (no GPU)."""
    if not cuda:
        return "none"
    return "vllm" if vllm else "cuda"


def plan_lines(cuda: bool, vllm: bool, reason: str = "") -> list[str]:
    """What `make gpu-check` does here, in words."""
    chosen = choose(cuda, vllm)
    if chosen != "none":
        return [f"gpu-check: runs {PLANS[chosen]}"]
    why = reason or "torch sees no CUDA GPU on this machine"
    return [
        f"gpu-check: needs a CUDA GPU ({why}): nothing was checked. On a GPU machine it runs",
        f"  with vLLM{' (installed here)' if vllm else ''}: {PLANS['vllm']};",
        f"  without vLLM{'' if vllm else ' (as here)'}: {PLANS['cuda']}.",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devtools gpu-check", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", type=Path, default=Path("reports/gpu"))
    parser.add_argument("--steps", type=int, default=20, help="RL steps on the GPU")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats per shape")
    parser.add_argument("--dry-run", action="store_true", help="say what would run; run nothing")
    parser.add_argument("--reason", default="", help="why there is no GPU (from the Makefile)")
    args = parser.parse_args(argv)
    vllm = has_vllm()
    cuda = False if args.reason else cuda_available()
    chosen = choose(cuda, vllm)
    if args.dry_run or chosen == "none":
        print("\n".join(plan_lines(cuda, vllm, args.reason)))
        return 0
    print("\n".join(plan_lines(cuda, vllm)))
    repeats = [] if args.repeats is None else ["--repeats", str(args.repeats)]
    if chosen == "vllm":
        from devtools.bench import gpu

        return gpu.main(["--out", str(args.out), "--steps", str(args.steps), *repeats])
    from devtools.bench import gpu_cuda

    options = gpu_cuda.Options(steps=args.steps)
    if args.repeats is not None:
        options = gpu_cuda.Options(steps=args.steps, repeats=args.repeats)
    return gpu_cuda.run(args.out, options)
