"""The vLLM check of `make gpu-check`, on a CUDA machine where vLLM is importable (the
dispatcher, `devtools.bench.gpu_check`, runs the CUDA check, `gpu_cuda`, where it is not).

For a zoo model (rl_ready) and the 4.2M size (its seeded initialisation, as in `make bench`):
- parity with `HFEngine` on the same weights on the GPU: greedy completions agree, and the
  log-probs vLLM reports for its own samples equal the trainer's forward on those tokens;
- throughput at natural lengths (EOS-ended, up to 80 tokens): vLLM vs `model.generate` vs
  `HFEngine`, in completion tokens per second, 8 × 8 and 64 × 8 samples;
then 20 GRPO steps on rl_ready sampling with vLLM, the weights synced after every update (each
step's `offpolicy/log_ratio_abs_mean` is the engine's distance from the trainer's policy, which
stays at kernel noise only if the sync works), a weight change vLLM must follow, and the step
time against the same steps on `HFEngine`. Writes reports/gpu/gpu_check.{md,json}; exits 1 if a
check fails. Without CUDA it says so and exits 0: there is nothing to check.

vLLM itself is imported only by `ablate.rollout.vllm` (the engine); `run_check` takes the engine
factory, so the whole check also runs with `HFEngine` standing in for vLLM (tests, on the CPU).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from devtools.bench.rollout import generated_lengths, zoo_prompts

NO_GPU = "gpu-check: needs a CUDA GPU, and torch sees none on this machine: nothing was checked"
MAX_TOKENS = 80
#: Pass thresholds. Greedy rows may part on a near-tie where fp32 kernels differ (vLLM's vs
#: PyTorch's): most rows must agree. Log-probs: vLLM's of its samples vs the trainer's forward.
GREEDY_AGREEMENT = 0.8
LOGPROB_MEAN_ABS = 1e-3
LOGPROB_MAX_ABS = 5e-2
SYNC_LOG_RATIO = 1e-3  # mean |trainer − engine| log-prob in every step after a sync

EngineFactory = Callable[[Any, Any], Any]


@dataclasses.dataclass
class Check:
    name: str
    passed: bool
    detail: str


def greedy_parity(engine, hf, prompts: list[str]) -> tuple[float, Check]:
    """Share of greedy completions (48 tokens) the two engines write identically."""
    from ablate.base.records import SamplingParams

    sampling = SamplingParams(max_new_tokens=48, temperature=0.0)
    ours, theirs = hf.generate(prompts, 1, sampling), engine.generate(prompts, 1, sampling)
    same = sum(a == b for a, b in zip(ours.texts, theirs.texts, strict=True)) / len(prompts)
    detail = f"{same:.0%} of {len(prompts)} greedy completions identical"
    return same, Check("greedy completions", same >= GREEDY_AGREEMENT, detail)


def logprob_parity(engine, model, prompts: list[str]) -> tuple[dict[str, float], Check]:
    """vLLM's log-probs of its own 8 × 8 samples against the trainer's forward on them."""
    from ablate.base.records import SamplingParams
    from ablate.stages.forward import frozen_logprobs

    rollouts = engine.generate(prompts, 8, SamplingParams(max_new_tokens=MAX_TOKENS, seed=1))
    mask = rollouts.completion_mask > 0
    trainer = frozen_logprobs(model, rollouts, 1.0)
    diff = (trainer - rollouts.logprobs)[mask].abs()
    stats = {
        "mean_abs": float(diff.mean()),
        "max_abs": float(diff.max()),
        "mean_length": float(rollouts.lengths.float().mean()),
    }
    ok = stats["mean_abs"] <= LOGPROB_MEAN_ABS and stats["max_abs"] <= LOGPROB_MAX_ABS
    detail = f"|Δ log-prob| mean {stats['mean_abs']:.2e}, max {stats['max_abs']:.2e}"
    return stats, Check("sampled log-probs", ok, detail)


def throughput(engine, hf, model, tokenizer, shape: tuple[int, int], repeats: int) -> dict:
    """Completion tokens/s of vLLM, `model.generate` and `HFEngine` (median of `repeats`
    interleaved runs after a warm-up; a fresh seed each), EOS-ended up to MAX_TOKENS."""
    from ablate.base.records import SamplingParams
    from devtools.bench.harness import interleave

    prompts, group = zoo_prompts(shape[0]), shape[1]
    texts, stop = prompts
    device = next(model.parameters()).device
    encoded = tokenizer(texts, padding=True, padding_side="left", return_tensors="pt").to(device)
    seeds, tokens = iter(range(1, 10**9)), {"vllm": [], "generate": [], "hf engine": []}

    def sample(name, eng):
        def run():
            sampling = SamplingParams(max_new_tokens=MAX_TOKENS, stop=stop, seed=next(seeds))
            tokens[name].append(int(eng.generate(texts, group, sampling).lengths.sum()))

        return run

    def generate():
        torch.manual_seed(next(seeds))
        with torch.inference_mode():
            out = model.generate(
                **encoded,
                do_sample=True,
                top_k=0,
                max_new_tokens=MAX_TOKENS,
                num_return_sequences=group,
                eos_token_id=tokenizer.eos_token_id,
                pad_token_id=tokenizer.pad_token_id,
            )
        new = out[:, encoded["input_ids"].shape[1] :]
        tokens["generate"].append(sum(generated_lengths(new, tokenizer.eos_token_id)))

    runners = {"vllm": sample("vllm", engine), "generate": generate}
    runners["hf engine"] = sample("hf engine", hf)
    runs = interleave(runners, repeats, warmup=1)
    rates = {
        name: statistics.median(
            t / s for t, s in zip(tokens[name][1:], runs.seconds[name], strict=True)
        )
        for name in runners
    }
    return {f"{name} tok/s": rate for name, rate in rates.items()}


def check_model(label: str, folder: Path, make_engine: EngineFactory, device: str, options):
    """(engine, model, tokenizer, results, checks) of one model; the engine is kept for RL."""
    from ablate.models import load_model
    from ablate.rollout.hf import HFEngine

    model, tokenizer = load_model(folder)
    model.float().to(device).eval()
    engine, hf = make_engine(model, tokenizer), HFEngine(model, tokenizer, device=device)
    prompts, _ = zoo_prompts(16)
    agreement, greedy = greedy_parity(engine, hf, prompts)
    logprobs, parity = logprob_parity(engine, model, prompts[:8])
    speed = {
        f"{p}x{g}": throughput(engine, hf, model, tokenizer, (p, g), options.repeats)
        for p, g in options.shapes
    }
    results = {"greedy_agreement": agreement, "logprobs": logprobs, "throughput": speed}
    checks = [dataclasses.replace(c, name=f"{label}: {c.name}") for c in (greedy, parity)]
    return engine, model, tokenizer, results, checks


def rl_run(loaded, make_engine: EngineFactory, engine_name: str, device: str, steps: int):
    """Per-step metrics of `steps` GRPO steps (no KL, off-policy correction on so that each
    step logs the engine's distance from the trainer) on `loaded` = (model, tokenizer)."""
    from ablate.factors.eval_spec import EvalSpec
    from ablate.factors.presets import baseline
    from ablate.factors.spec import Budget, Optim, TrialSpec
    from ablate.tracking import MemoryTracker
    from ablate.trial import train

    algorithm = dataclasses.replace(
        baseline("grpo"), kl_coef=0.0, rollout_correction="token_truncate"
    )
    spec = TrialSpec(
        algorithm=algorithm,
        model="rl_ready",
        engine=engine_name,
        device=device,
        budget=Budget(max_steps=steps, prompts_per_step=8, group_size=8, max_new_tokens=80),
        optim=Optim(lr=3e-5),
        eval=EvalSpec(at_start=False, max_problems=8, n_samples=2, ks=(1,)),
    )
    tracker = MemoryTracker()
    result = train(spec, tracker=tracker, loaded=loaded, engine=make_engine)
    if result.outcome != "finished":
        raise RuntimeError(f"the {engine_name} RL run {result.outcome}: {result.message}")
    return [m for _, m in tracker.metrics if "perf/step_seconds" in m]


def follows_weights(engine, model, tokenizer) -> Check:
    """A weight change reaches the engine: with the final norm zeroed every logit is 0, so
    every sampled token's log-prob is −log V; the weights are restored (and synced) after."""
    from ablate.base.records import SamplingParams

    norm = model.model.norm.weight
    saved = norm.detach().clone()
    try:
        with torch.no_grad():
            norm.zero_()
        engine.sync_weights(model)
        prompts, _ = zoo_prompts(2)
        after = engine.generate(prompts, 4, SamplingParams(max_new_tokens=8, seed=0))
    finally:
        with torch.no_grad():
            norm.copy_(saved)
        engine.sync_weights(model)
    valid = after.completion_mask > 0
    gap = float((after.logprobs[valid] + math.log(model.config.vocab_size)).abs().max())
    return Check(
        "weight sync", gap < 1e-3, f"after zeroing the final norm: max |log p + log V| {gap:.1e}"
    )


def rl_checks(engine, loaded, make_hf: EngineFactory, device: str, steps: int):
    """(results, checks) of the RL part: vLLM-sampled steps, HF-sampled steps, weight sync."""
    model, tokenizer = loaded
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}

    def reuse(m, t):
        engine.sync_weights(m)  # the trial's own model, restored to the start weights
        return engine

    vllm_steps = rl_run(loaded, reuse, "vllm", device, steps)
    model.load_state_dict(start)
    hf_steps = rl_run(loaded, make_hf, "hf", device, steps)
    warm = slice(min(3, steps - 1), None)  # the first steps include lazy set-up
    distance = [m["offpolicy/log_ratio_abs_mean"] for m in vllm_steps]
    results = {
        "steps": steps,
        "vllm step s": statistics.median(m["perf/step_seconds"] for m in vllm_steps[warm]),
        "hf step s": statistics.median(m["perf/step_seconds"] for m in hf_steps[warm]),
        "vllm gen s": statistics.median(m["perf/gen_seconds"] for m in vllm_steps[warm]),
        "hf gen s": statistics.median(m["perf/gen_seconds"] for m in hf_steps[warm]),
        "engine distance per step": distance,
    }
    synced = Check(
        "RL steps with weight sync",
        len(vllm_steps) == steps and max(distance) <= SYNC_LOG_RATIO,
        f"{len(vllm_steps)} steps; mean |trainer − engine| log-prob at most {max(distance):.1e}",
    )
    return results, [synced, follows_weights(engine, model, tokenizer)]


@dataclasses.dataclass(frozen=True)
class Options:
    """What the check runs: RL steps, timed repeats, sample shapes (prompts, G)."""

    steps: int = 20
    repeats: int = 3
    shapes: tuple[tuple[int, int], ...] = ((8, 8), (64, 8))


def default_models(scratch: Path) -> dict[str, Path]:
    """A zoo model and the 4.2M size (seeded initialisation, as `make bench` builds it)."""
    from ablate.models import zoo_path
    from devtools.bench.models import model_dir

    return {"rl_ready": zoo_path("rl_ready"), "4.2M": model_dir("4.2M", scratch)}


def run_check(make_engine: EngineFactory, device: str, models: dict[str, Path], options: Options):
    """Every part of the check: ({model label: results, "rl": results}, checks); the RL steps
    run on the first model."""
    from ablate.rollout.hf import HFEngine

    results: dict[str, Any] = {}
    checks: list[Check] = []
    kept = None
    for label, folder in models.items():
        engine, model, tokenizer, res, chk = check_model(
            label, folder, make_engine, device, options
        )
        results[label], checks = res, checks + chk
        if kept is None:
            kept = (engine, (model, tokenizer))
    engine, loaded = kept

    def make_hf(m, t):
        return HFEngine(m, t, device=device)

    results["rl"], rl = rl_checks(engine, loaded, make_hf, device, options.steps)
    return results, checks + rl


def render(results: dict, checks: list[Check], meta: dict) -> str:
    lines = ["# GPU check: the vLLM engine", ""]
    lines += [f"- {k}: {v}" for k, v in meta.items()]
    lines += ["", "## Checks", ""]
    lines += [f"- {'✅' if c.passed else '❌'} {c.name}: {c.detail}" for c in checks]
    lines += ["", "## Throughput (completion tokens/s, EOS-ended, up to 80 tokens)", ""]
    lines += ["| model | samples | vLLM | `model.generate` | HFEngine | vLLM ÷ generate |"]
    lines += ["|---|---|---:|---:|---:|---:|"]
    for label in (k for k in results if k != "rl"):
        for shape, r in results[label]["throughput"].items():
            v, g, h = r["vllm tok/s"], r["generate tok/s"], r["hf engine tok/s"]
            lines.append(f"| {label} | {shape} | {v:,.0f} | {g:,.0f} | {h:,.0f} | {v / g:.2f} |")
    rl = results["rl"]
    lines += [
        "",
        f"## RL step (rl_ready, 8 × 8, up to 80 tokens; median of steps 4–{rl['steps']})",
        "",
    ]
    lines += [
        f"- vLLM sampling: step {rl['vllm step s']:.3f} s (sampling {rl['vllm gen s']:.3f} s)",
        f"- HFEngine sampling: step {rl['hf step s']:.3f} s (sampling {rl['hf gen s']:.3f} s)",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devtools gpu-check", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", type=Path, default=Path("reports/gpu"))
    parser.add_argument("--steps", type=int, default=Options.steps)
    parser.add_argument("--repeats", type=int, default=Options.repeats)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print(NO_GPU)
        return 0
    import tempfile

    from ablate.base.devices import configure_determinism
    from ablate.rollout import vllm as vllm_engine

    started = time.perf_counter()
    determinism = configure_determinism("cuda")  # before any tensor reaches the GPU
    options = Options(steps=args.steps, repeats=args.repeats)
    with tempfile.TemporaryDirectory(prefix="ablate-gpu-check-") as scratch:
        models = default_models(Path(scratch))
        try:
            results, checks = run_check(vllm_engine.VLLMEngine, "cuda", models, options)
        finally:
            vllm_engine.close()
    meta = {
        "GPU": torch.cuda.get_device_name(),
        "vLLM settings": f"dtype float32, logprobs_mode {vllm_engine.LOGPROBS_MODE}, attention "
        f"{vllm_engine.attention_precision('float32')}, one n=1 request per sample",
        "trainer determinism": determinism,
        "versions": _versions(),
        "wall time": f"{time.perf_counter() - started:.0f} s",
    }
    return write(results, checks, meta, args.out)


def write(results: dict, checks: list[Check], meta: dict, out: Path) -> int:
    """reports: gpu_check.md and gpu_check.json under `out`; 0 when every check passed."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.md").write_text(render(results, checks, meta), encoding="utf-8")
    payload = {"meta": meta, "checks": [dataclasses.asdict(c) for c in checks], **results}
    (out / "gpu_check.json").write_text(json.dumps(payload, indent=1), encoding="utf-8")
    for c in checks:
        print(f"{'ok  ' if c.passed else 'FAIL'} {c.name}: {c.detail}")
    print(f"wrote {out / 'gpu_check.md'}")
    return 0 if all(c.passed for c in checks) else 1


def _versions() -> str:
    from importlib import metadata

    out = []
    for package in ("torch", "transformers", "vllm"):
        try:
            out.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            out.append(f"{package} not installed")
    return ", ".join(out)
