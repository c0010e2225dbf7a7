"""The CUDA check of `make gpu-check`, for a GPU machine without vLLM (and without network): the
trainer and `HFEngine` on `cuda`, against the same work on the CPU of the same machine.

For rl_ready (the zoo model) and the 4.2M size (its seeded initialisation, as in `make bench`):
- CUDA vs CPU: the fused Llama forward and one packed update's gradients, fp32 and bf16
  autocast, within `devtools.bench.cuda_parity`'s stated tolerances;
- engine vs trainer: the log-probs `HFEngine` reports for its own 8 × 8 samples on `cuda` (KV-cache
  decode) against the trainer's forward on the same tokens;
- tokens/s of `HFEngine` sampling (EOS-ended, up to 80 tokens) on `cuda` and on the CPU;
- 20 GRPO steps on `cuda` (the reference model on `cuda` too) against `cpu_steps` on the CPU:
  each finishes, and the median step time of each.
Needs only the project, its small pure-Python dependencies and the machine's PyTorch: no vLLM,
no MLflow (runs are tracked in memory; the report is files). Writes
reports/gpu/cuda_check.{md,json}; exits 1 if a check fails.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from devtools.bench import cuda_parity
from devtools.bench.gpu import Check, _versions, default_models
from devtools.bench.rollout import zoo_prompts

MAX_TOKENS = 80
#: `HFEngine`'s log-probs of its samples vs the trainer's forward on them (fp32, TF32 off: the
#: two differ only by kernel summation order between KV-cache decode and the full forward).
ENGINE_LOGP_MEAN_ABS = 1e-4
ENGINE_LOGP_MAX_ABS = 1e-2


@dataclasses.dataclass(frozen=True)
class Options:
    """What the check runs: GRPO steps on cuda and on the CPU, timed repeats, sample shapes."""

    steps: int = 20
    cpu_steps: int = 3
    repeats: int = 2
    shapes: tuple[tuple[int, int], ...] = ((8, 8), (64, 8))


def engine_distance(model, tokenizer, device: str) -> tuple[dict[str, float], Check]:
    """|engine − trainer| log-prob of `HFEngine`'s 8 × 8 samples on `device`."""
    from ablate.base.records import SamplingParams
    from ablate.rollout.hf import HFEngine
    from ablate.stages.forward import frozen_logprobs

    prompts, stop = zoo_prompts(8)
    sampling = SamplingParams(max_new_tokens=MAX_TOKENS, stop=stop, seed=1)
    rollouts = HFEngine(model, tokenizer, device=device).generate(prompts, 8, sampling)
    mask = rollouts.completion_mask > 0
    diff = (frozen_logprobs(model, rollouts, 1.0) - rollouts.logprobs)[mask].abs()
    stats = {"mean_abs": float(diff.mean()), "max_abs": float(diff.max())}
    ok = stats["mean_abs"] <= ENGINE_LOGP_MEAN_ABS and stats["max_abs"] <= ENGINE_LOGP_MAX_ABS
    detail = f"|Δ log-prob| mean {stats['mean_abs']:.2e}, max {stats['max_abs']:.2e}"
    return stats, Check("engine vs trainer log-probs", ok, detail)


def tokens_per_second(model, tokenizer, device: str, shape: tuple[int, int], repeats: int):
    """Median completion tokens/s of `HFEngine` on `device` (one warm-up, fresh seeds)."""
    from ablate.base.records import SamplingParams
    from ablate.rollout.hf import HFEngine

    engine = HFEngine(model, tokenizer, device=device)
    prompts, stop = zoo_prompts(shape[0])
    rates = []
    for seed in range(repeats + 1):
        sampling = SamplingParams(max_new_tokens=MAX_TOKENS, stop=stop, seed=seed + 1)
        start = time.perf_counter()
        tokens = int(engine.generate(prompts, shape[1], sampling).lengths.sum())
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        if seed:  # the first run warms the allocator and kernels
            rates.append(tokens / (time.perf_counter() - start))
    return statistics.median(rates)


def grpo_steps(loaded, device: str, steps: int) -> list[dict[str, float]]:
    """Per-step metrics of `steps` GRPO steps (8 × 8, up to 80 tokens) on `device`."""
    from ablate.factors.eval_spec import EvalSpec
    from ablate.factors.presets import baseline
    from ablate.factors.spec import Budget, Optim, TrialSpec
    from ablate.tracking import MemoryTracker
    from ablate.trial import train

    spec = TrialSpec(
        algorithm=baseline("grpo"),
        model="rl_ready",
        device=device,
        budget=Budget(max_steps=steps, prompts_per_step=8, group_size=8, max_new_tokens=80),
        optim=Optim(lr=3e-5),
        eval=EvalSpec(at_start=False, max_problems=8, n_samples=2, ks=(1,)),
    )
    tracker = MemoryTracker()
    result = train(spec, tracker=tracker, loaded=loaded)
    if result.outcome != "finished":
        raise RuntimeError(f"the GRPO run on {device} {result.outcome}: {result.message}")
    return [m for _, m in tracker.metrics if "perf/step_seconds" in m]


def _median_step(metrics: list[dict[str, float]]) -> float:
    warm = metrics[1:] if len(metrics) > 1 else metrics  # the first step includes lazy set-up
    return statistics.median(m["perf/step_seconds"] for m in warm)


def check_model(label: str, folder: Path, options: Options, device: str):
    """(results, checks) of one model on `device` against the CPU."""
    from ablate.models import load_model

    model, tokenizer = load_model(folder)
    model.float().eval()
    parity = cuda_parity.parity(model, device)
    checks = [
        Check(
            "CUDA vs CPU forward and packed update",
            cuda_parity.parity_passed(parity),
            ", ".join(f"{k} {v:.1e}" for k, v in parity.items()),
        )
    ]
    on_device = copy.deepcopy(model).to(device)
    distance, check = engine_distance(on_device, tokenizer, device)
    checks.append(check)
    speed = {
        f"{p}x{g}": {
            name: tokens_per_second(m, tokenizer, dev, (p, g), options.repeats)
            for name, m, dev in (("cuda", on_device, device), ("cpu", model, "cpu"))
        }
        for p, g in options.shapes
    }
    gpu_steps = grpo_steps((copy.deepcopy(model), tokenizer), device, options.steps)
    cpu_steps = grpo_steps((copy.deepcopy(model), tokenizer), "cpu", options.cpu_steps)
    finite = all(torch.isfinite(torch.tensor(m["policy/loss"])) for m in gpu_steps)
    checks.append(
        Check(
            f"{options.steps} GRPO steps on {device}",
            len(gpu_steps) == options.steps and finite,
            f"{len(gpu_steps)} steps, every loss finite: {finite}",
        )
    )
    results = {
        "parity": parity,
        "engine_logprobs": distance,
        "tokens_per_second": speed,
        "step_seconds": {"cuda": _median_step(gpu_steps), "cpu": _median_step(cpu_steps)},
        "gen_seconds": {
            "cuda": statistics.median(m["perf/gen_seconds"] for m in gpu_steps[1:] or gpu_steps),
            "cpu": statistics.median(m["perf/gen_seconds"] for m in cpu_steps[1:] or cpu_steps),
        },
    }
    return results, [dataclasses.replace(c, name=f"{label}: {c.name}") for c in checks]


def run_check(models: dict[str, Path], options: Options, device: str = "cuda"):
    """({model label: results}, checks) for every model."""
    results: dict[str, Any] = {}
    checks: list[Check] = []
    for label, folder in models.items():
        results[label], found = check_model(label, folder, options, device)
        checks += found
    return results, checks


def render(results: dict, checks: list[Check], meta: dict, options: Options) -> str:
    lines = ["# GPU check: the trainer and HFEngine on CUDA (no vLLM)", ""]
    lines += [f"- {k}: {v}" for k, v in meta.items()]
    lines += ["", "## Checks", ""]
    lines += [f"- {'✅' if c.passed else '❌'} {c.name}: {c.detail}" for c in checks]
    lines += ["", "## HFEngine sampling (completion tokens/s, EOS-ended, up to 80 tokens)", ""]
    lines += ["| model | samples | cuda | cpu | cuda ÷ cpu |", "|---|---|---:|---:|---:|"]
    for label, r in results.items():
        for shape, s in r["tokens_per_second"].items():
            ratio = s["cuda"] / s["cpu"]
            lines.append(
                f"| {label} | {shape} | {s['cuda']:,.0f} | {s['cpu']:,.0f} | {ratio:.2f} |"
            )
    lines += ["", "## GRPO step (8 × 8, up to 80 tokens; median after the first step)", ""]
    lines += [
        f"{options.steps} steps on cuda, {options.cpu_steps} on the CPU.",
        "",
        "| model | cuda step s | cpu step s | cuda sampling s | cpu sampling s |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, r in results.items():
        st, gen = r["step_seconds"], r["gen_seconds"]
        lines.append(
            f"| {label} | {st['cuda']:.3f} | {st['cpu']:.3f} | {gen['cuda']:.3f} | "
            f"{gen['cpu']:.3f} |"
        )
    return "\n".join([*lines, ""])


def write(results, checks, meta, options: Options, out: Path) -> int:
    """cuda_check.md and cuda_check.json under `out`; 0 when every check passed."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "cuda_check.md").write_text(render(results, checks, meta, options), encoding="utf-8")
    payload = {"meta": meta, "checks": [dataclasses.asdict(c) for c in checks], **results}
    (out / "cuda_check.json").write_text(json.dumps(payload, indent=1), encoding="utf-8")
    for c in checks:
        print(f"{'ok  ' if c.passed else 'FAIL'} {c.name}: {c.detail}")
    print(f"wrote {out / 'cuda_check.md'}")
    return 0 if all(c.passed for c in checks) else 1


def run(out: Path, options: Options) -> int:
    """The whole CUDA check on this machine's GPU (the dispatcher checked there is one)."""
    import tempfile

    from ablate.base.devices import configure_determinism

    started = time.perf_counter()
    determinism = configure_determinism("cuda")  # before any tensor reaches the GPU
    with tempfile.TemporaryDirectory(prefix="ablate-cuda-check-") as scratch:
        results, checks = run_check(default_models(Path(scratch)), options)
    meta = {
        "GPU": torch.cuda.get_device_name(),
        "CPU threads": torch.get_num_threads(),
        "versions": _versions(),
        "determinism": determinism,
        "wall time": f"{time.perf_counter() - started:.0f} s",
    }
    return write(results, checks, meta, options, out)
