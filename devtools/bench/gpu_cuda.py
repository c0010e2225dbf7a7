"""The CUDA parts of `make gpu-check` (`devtools.bench.gpu_check` runs them under its budget): the
trainer and `HFEngine` on the device against the same work on the CPU of the same machine. They
need only the project and the machine's own PyTorch and transformers: no vLLM, no MLflow (runs
are tracked in memory), nothing installed. With `device="cpu"` every part runs on the CPU (the
CUDA path forced onto it, for tests: a device against itself).

- `cuda-parity`: the fused Llama forward and one packed update's gradients on the device against
  the CPU, fp32 and bf16 autocast (rl_ready), within `cuda_parity`'s stated tolerances;
- `hf-engine`: the log-probs `HFEngine` reports for its own 8 × 8 samples on the device (KV-cache
  decode) against the trainer's forward on them, and its tokens/s on the device and the CPU;
- `trial`: one GRPO trial on the device (rl_ready, 8 × 8, up to 80 tokens, `steps` steps), every
  step's time and loss recorded as it is logged, then `cpu_steps` steps on the CPU;
- `size-4.2M`: the parity and the engine's log-probs at the 4.2M size (seeded initialisation).
Each part fills its `record` as it goes, so a part stopped at its cap keeps what it measured.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import statistics
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from devtools.bench import cuda_parity
from devtools.bench.gpu_budget import Check
from devtools.bench.rollout import zoo_prompts

MAX_TOKENS = 80
#: `HFEngine`'s log-probs of its samples vs the trainer's forward on them (fp32, TF32 off: the
#: two differ only by kernel summation order between KV-cache decode and the full forward).
ENGINE_LOGP_MEAN_ABS = 1e-4
ENGINE_LOGP_MAX_ABS = 1e-2


@dataclasses.dataclass
class Context:
    """What the parts share: the device, their sizes, and the models, loaded once (fp32, CPU;
    a part copies a model before moving or training it)."""

    device: str
    scratch: Path
    steps: int = 8
    cpu_steps: int = 2
    repeats: int = 2
    shapes: tuple[tuple[int, int], ...] = ((8, 8), (64, 8))
    vllm_steps: int = 5
    models: dict[str, Any] = dataclasses.field(default_factory=dict)

    def loaded(self, label: str):
        """(model, tokenizer) of "rl_ready" or "4.2M", loaded on first use."""
        if label not in self.models:
            from ablate.models import load_model
            from devtools.bench.models import model_dir

            model, tokenizer = load_model(
                model_dir("0.53M" if label == "rl_ready" else label, self.scratch)
            )
            self.models[label] = (model.float().eval(), tokenizer)
        return self.models[label]

    def start(self) -> None:
        """What every part needs first: rl_ready loaded and, on CUDA, the device's context."""
        self.loaded("rl_ready")
        if self.device.startswith("cuda"):
            torch.zeros(1, device=self.device)
            torch.cuda.synchronize()


def parity_check(result: dict[str, float]) -> Check:
    detail = ", ".join(f"{k} {v:.1e}" for k, v in result.items())
    return Check("CUDA vs CPU forward and packed update", cuda_parity.parity_passed(result), detail)


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


def parity_part(ctx: Context, record: dict, checks: list[Check]) -> None:
    model, _ = ctx.loaded("rl_ready")
    record.update(parity(model, ctx.device))
    checks.append(parity_check(record))


def engine_part(ctx: Context, record: dict, checks: list[Check]) -> None:
    model, tokenizer = ctx.loaded("rl_ready")
    on_device = copy.deepcopy(model).to(ctx.device)
    record["engine_logprobs"], check = engine_distance(on_device, tokenizer, ctx.device)
    checks.append(check)
    speed = record.setdefault("tokens_per_second", {})
    for p, g in ctx.shapes:  # filled as measured: a stop at the cap keeps the rates so far
        for where, m, device in (("device", on_device, ctx.device), ("cpu", model, "cpu")):
            speed[f"{p}x{g} {where}"] = tokens_per_second(m, tokenizer, device, (p, g), ctx.repeats)


def grpo_trial(loaded, device: str, steps: int, record: dict, key: str):
    """GRPO steps (8 × 8, up to 80 tokens) on `device`; each step's seconds and loss appended to
    `record[key]` as it is logged. Returns the trial's result."""
    from ablate import baseline
    from ablate.base.store.port import MemoryTracker
    from ablate.factors.eval_spec import EvalSpec
    from ablate.factors.spec import Budget, Optim, TrialSpec
    from ablate.trial import train

    rows = record.setdefault(key, [])

    class Recording(MemoryTracker):
        def log_metrics(self, metrics, step):
            super().log_metrics(metrics, step)
            if "perf/step_seconds" in metrics:
                rows.append({k: metrics[k] for k in ROW_METRICS if k in metrics})

    spec = TrialSpec(
        algorithm=baseline("grpo"),
        model="rl_ready",
        device=device,
        budget=Budget(max_steps=steps, prompts_per_step=8, group_size=8, max_new_tokens=80),
        optim=Optim(lr=3e-5),
        eval=EvalSpec(at_start=False, max_problems=8, n_samples=2, ks=(1,)),
    )
    return train(spec, tracker=Recording(), loaded=loaded)


ROW_METRICS = ("perf/step_seconds", "perf/gen_seconds", "policy/loss")


def trial_part(ctx: Context, record: dict, checks: list[Check]) -> None:
    model, tokenizer = ctx.loaded("rl_ready")
    record["device"] = ctx.device
    loaded = (copy.deepcopy(model), tokenizer)
    result = grpo_trial(loaded, ctx.device, ctx.steps, record, "steps on the device")
    done = record["steps on the device"]
    finite = all(math.isfinite(r["policy/loss"]) for r in done)
    record["median step s on the device"] = _median_step(done)
    if ctx.device.startswith("cuda"):
        record["peak GPU memory MiB"] = torch.cuda.max_memory_allocated() / 2**20
    checks.append(
        Check(
            f"{ctx.steps} GRPO steps on {ctx.device}",
            result.outcome == "finished" and len(done) == ctx.steps and finite,
            f"{result.outcome}: {len(done)} steps, every loss finite: {finite}",
        )
    )
    if ctx.cpu_steps:
        loaded = (copy.deepcopy(model), tokenizer)
        grpo_trial(loaded, "cpu", ctx.cpu_steps, record, "steps on the CPU")
        record["median step s on the CPU"] = _median_step(record["steps on the CPU"])


def size_part(ctx: Context, record: dict, checks: list[Check]) -> None:
    """The parity and the engine's log-probs at the 4.2M size."""
    model, tokenizer = ctx.loaded("4.2M")
    record["parity"] = parity(model, ctx.device)
    checks.append(parity_check(record["parity"]))
    on_device = copy.deepcopy(model).to(ctx.device)
    record["engine_logprobs"], check = engine_distance(on_device, tokenizer, ctx.device)
    checks.append(check)


def parity(model, device: str) -> dict[str, float]:
    """`cuda_parity.parity`; forced onto the CPU, bf16 autocast is a no-op that warns: quiet."""
    with warnings.catch_warnings():
        if not device.startswith("cuda"):
            warnings.filterwarnings("ignore", message="CUDA is not available")
        return cuda_parity.parity(model, device)


def _median_step(rows: list[dict[str, float]]) -> float:
    warm = rows[1:] if len(rows) > 1 else rows  # the first step includes lazy set-up
    return statistics.median(r["perf/step_seconds"] for r in warm) if warm else float("nan")
