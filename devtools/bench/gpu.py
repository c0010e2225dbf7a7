"""The vLLM part of `make gpu-check` (`devtools.bench.gpu_check` runs it under its budget, on a
CUDA machine where vLLM is importable), on rl_ready:
- parity with `HFEngine` on the same weights on the GPU: greedy completions agree, and the
  log-probs vLLM reports for its own samples equal the trainer's forward on those tokens;
- tokens/s at natural lengths (EOS-ended, up to 80 tokens), 8 × 8: vLLM vs `model.generate` vs
  `HFEngine`;
- `vllm_steps` GRPO steps sampled by vLLM, the weights synced after every update (each step's
  `offpolicy/logp_diff_mean` is the engine's distance from the trainer's policy, which stays
  at kernel noise only if the sync works), a weight change vLLM must follow, and the step time
  against the same steps on `HFEngine`;
- `close()` returns the engine's GPU memory: reserved bytes after it against before the build.

vLLM itself is imported only by `ablate.rollout.vllm` (the engine); `vllm_part` takes the engine
factory and the closer, so the part also runs on the CPU against the fake `vllm`
(`ablate.testing.vllm`) or with `HFEngine` standing in (tests).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from devtools.bench.gpu_budget import Check
from devtools.bench.rollout import generated_lengths, zoo_prompts

MAX_TOKENS = 80
#: Pass thresholds. Greedy rows may part on a near-tie where fp32 kernels differ (vLLM's vs
#: PyTorch's): most rows must agree. Log-probs: vLLM's of its samples vs the trainer's forward.
GREEDY_AGREEMENT = 0.8
LOGPROB_MEAN_ABS = 1e-3
LOGPROB_MAX_ABS = 5e-2
SYNC_LOG_RATIO = 1e-3  # mean |trainer − engine| log-prob in every step after a sync

EngineFactory = Callable[[Any, Any], Any]


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
    distance = [m["offpolicy/logp_diff_mean"] for m in vllm_steps]
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


#: What `close()` may leave behind: torch-allocated bytes (the engine's weights and KV cache are
#: torch tensors) and bytes in use on the device (CUDA's own context and workspaces move a little).
CLOSE_ALLOCATED_BYTES = 64 * 2**20
CLOSE_DEVICE_BYTES = 2**30


def memory(device: str) -> dict[str, int]:
    """torch-allocated bytes and bytes in use on the device (0 off CUDA)."""
    if not torch.cuda.is_available():
        return {"allocated": 0, "device used": 0}
    free, total = torch.cuda.mem_get_info()
    return {"allocated": torch.cuda.memory_allocated(), "device used": total - free}


def vllm_part(ctx, record: dict, checks: list[Check], make_engine=None, close=None) -> None:
    """The vLLM part on rl_ready (see the module's docstring); `record` filled as it goes."""
    from ablate.rollout import vllm as vllm_engine
    from ablate.rollout.hf import HFEngine

    make_engine, close = make_engine or vllm_engine.VLLMEngine, close or vllm_engine.close
    base, tokenizer = ctx.loaded("rl_ready")
    model = copy.deepcopy(base).to(ctx.device).eval()
    before, start = memory(ctx.device), time.perf_counter()
    engine = make_engine(model, tokenizer)
    record["engine build s"] = time.perf_counter() - start
    try:
        hf = HFEngine(model, tokenizer, device=ctx.device)
        prompts, _ = zoo_prompts(16)
        record["greedy agreement"], greedy = greedy_parity(engine, hf, prompts)
        record["sampled logprobs"], parity = logprob_parity(engine, model, prompts[:8])
        checks += [greedy, parity]
        shape = ctx.shapes[0]
        record[f"{shape[0]}x{shape[1]}"] = throughput(
            engine, hf, model, tokenizer, shape, ctx.repeats
        )

        def make_hf(m, t):
            return HFEngine(m, t, device=ctx.device)

        loaded = (model, tokenizer)
        record["rl"], rl = rl_checks(engine, loaded, make_hf, ctx.device, ctx.vllm_steps)
        checks += rl
    finally:
        close()  # also when stopped at the cap: the later parts get the memory back
    checks.append(freed_check(before, memory(ctx.device), record))


def freed_check(before: dict[str, int], after: dict[str, int], record: dict) -> Check:
    grown = {k: after[k] - before[k] for k in before}
    record["after close, MiB more than before the build"] = {k: v / 2**20 for k, v in grown.items()}
    ok = grown["allocated"] <= CLOSE_ALLOCATED_BYTES and grown["device used"] <= CLOSE_DEVICE_BYTES
    detail = ", ".join(f"{k} {v / 2**20:+.1f} MiB" for k, v in grown.items())
    return Check("close() returns the engine's memory", ok, f"after close vs before: {detail}")
