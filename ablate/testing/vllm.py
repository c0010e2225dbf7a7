"""A fake `vllm` for CPU tests of `ablate.rollout.vllm`, shaped as vLLM 0.19's in-process engine:
it records what ablate passes to vLLM, samples from the saved model as vLLM's sampler does
(`vllm_sampler`: temperature, top-k, top-p, the `logprobs_mode`), and accounts for the GPU
memory an engine holds, releasing only what is released.

    fake = FakeVLLM().install(monkeypatch)   # the modules, CUDA "present", its memory

What it models of vLLM 0.19 (and only that):
- `LLM(model, **kwargs)` refuses an unknown keyword (TypeError, as `EngineArgs` does) and an
  unknown `logprobs_mode`; `SamplingParams` likewise (`vllm_sampler.FakeSamplingParams`);
- the in-process layout: `LLM.llm_engine` -> `.engine_core` (InprocClient) -> `.engine_core`
  (EngineCore) -> `.model_executor` -> `.driver_worker` -> `.model_runner`, which holds the
  weights and the KV cache; `LLMEngine.model_executor` holds the executor too ("for v0
  compatibility"), and the worker points back at its executor (a cycle: only gc frees it);
- memory (`FakeCudaMemory`): an engine takes `gpu_memory_utilization` of the device (weights +
  KV cache) and is refused, as vLLM refuses, when less is free; a block returns to the caching
  allocator only when its holder is garbage, and to the device only at `torch.cuda.empty_cache`;
  `EngineCore.shutdown()` frees nothing (vllm-project/vllm #21073); the world group
  (`vllm.distributed.parallel_state._WORLD`) holds its buffers until
  `destroy_distributed_environment()`.
Samples depend only on each request's seed (children of an n-sample request: seed + j).
"""

from __future__ import annotations

import gc
import sys
import types
import weakref
from dataclasses import dataclass, field
from typing import Any

import torch

from ablate.models import load_model
from ablate.testing.vllm_sampler import LOGPROBS_MODES, FakeSamplingParams, sample_step

GIB = 2**30
#: The keywords vLLM 0.19's `LLM(...)` takes (its own and `EngineArgs` fields ablate may use).
LLM_KEYWORDS = frozenset(
    [
        "tokenizer",
        "tokenizer_mode",
        "skip_tokenizer_init",
        "trust_remote_code",
        "tensor_parallel_size",
        "dtype",
        "quantization",
        "revision",
        "tokenizer_revision",
        "seed",
        "gpu_memory_utilization",
        "swap_space",
        "cpu_offload_gb",
        "enforce_eager",
        "disable_custom_all_reduce",
        "hf_token",
        "hf_overrides",
        "mm_processor_kwargs",
        "compilation_config",
        "logits_processors",
        "max_model_len",
        "max_num_seqs",
        "max_logprobs",
        "enable_prefix_caching",
        "logprobs_mode",
        "kv_cache_dtype",
        "load_format",
    ]
)
WORLD_GROUP_BYTES = 64 * 2**20  # the world group's communication buffers


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class Completion:
    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None
    logprobs: list[dict[int, Logprob]]
    finish_reason: str


@dataclass
class RequestOutput:
    prompt_token_ids: list[int]
    outputs: list[Completion]


@dataclass
class Calls:
    """Everything the fake saw, in order."""

    llm_kwargs: list[dict[str, Any]] = field(default_factory=list)
    sampling: list[FakeSamplingParams] = field(default_factory=list)
    prompts: list[list[int]] = field(default_factory=list)
    loaded_weights: list[list[str]] = field(default_factory=list)
    shutdowns: int = 0

    @property
    def seeds(self) -> list[int | None]:
        return [p.seed for p in self.sampling]


class _Block:
    """Device memory in use while this object lives."""

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes


class FakeCudaMemory:
    """A device of `total` bytes behind a caching allocator: `allocated` bytes in live blocks,
    `cached` bytes freed but kept by the allocator until `empty_cache()`."""

    def __init__(self, total: int = 8 * GIB) -> None:
        self.total, self.allocated, self.cached = total, 0, 0

    def allocate(self, nbytes: int) -> _Block:
        """A block of `nbytes`: returned to the cache when it is garbage collected."""
        block = _Block(nbytes)
        self.allocated += nbytes
        weakref.finalize(block, self._free, nbytes)
        return block

    def _free(self, nbytes: int) -> None:
        self.allocated -= nbytes
        self.cached += nbytes

    def empty_cache(self) -> None:
        self.cached = 0

    def memory_allocated(self, device: Any = None) -> int:
        return self.allocated

    def memory_reserved(self, device: Any = None) -> int:
        return self.allocated + self.cached

    def mem_get_info(self, device: Any = None) -> tuple[int, int]:
        return self.total - self.memory_reserved(), self.total


class _ModelRunner:
    def __init__(self, model, tokenizer, weights: _Block, kv_cache: _Block) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.weights, self.kv_cache = weights, kv_cache


class _Worker:
    def __init__(self, runner: _ModelRunner) -> None:
        self.model_runner = runner
        self.executor: Any = None


class _Executor:
    def __init__(self, runner: _ModelRunner) -> None:
        self.driver_worker = _Worker(runner)
        self.driver_worker.executor = self  # a reference cycle: freed by gc, not by refcounts

    def shutdown(self) -> None:
        """Stops the workers; their model and KV cache stay where they are."""


class _EngineCore:
    def __init__(self, executor: _Executor, calls: Calls) -> None:
        self.model_executor, self.calls = executor, calls

    def shutdown(self) -> None:
        self.calls.shutdowns += 1
        self.model_executor.shutdown()


class _InprocClient:
    def __init__(self, core: _EngineCore) -> None:
        self.engine_core = core

    def shutdown(self) -> None:
        self.engine_core.shutdown()


class _LLMEngine:
    def __init__(self, client: _InprocClient) -> None:
        self.engine_core = client
        self.model_executor = client.engine_core.model_executor  # "for v0 compatibility"


class _LoadsWeights:
    """What `apply_model` hands its function: vLLM's model, with `load_weights`."""

    def __init__(self, runner: _ModelRunner, calls: Calls) -> None:
        self.runner, self.calls = runner, calls

    def load_weights(self, items) -> None:
        state = dict(items)
        self.calls.loaded_weights.append(list(state))
        with torch.no_grad():
            self.runner.model.load_state_dict(state, strict=True)


class FakeLLM:
    """vLLM's `LLM` on the CPU: the saved model in `dtype`, sampled one request at a time."""

    def __init__(self, fake: FakeVLLM, model: str, **kwargs: Any) -> None:
        for name in kwargs:
            if name not in LLM_KEYWORDS:
                raise TypeError(
                    f"EngineArgs.__init__() got an unexpected keyword argument '{name}'"
                )
        self.logprobs_mode = kwargs.get("logprobs_mode", "raw_logprobs")
        if self.logprobs_mode not in LOGPROBS_MODES:
            raise ValueError(f"logprobs_mode={self.logprobs_mode!r} is not one of {LOGPROBS_MODES}")
        fake.calls.llm_kwargs.append({"model": model, **kwargs})
        self.calls = fake.calls
        memory = fake.cuda
        utilization = kwargs.get("gpu_memory_utilization", 0.9)
        need, (free, total) = int(utilization * memory.total), memory.mem_get_info()
        if need > free:
            raise ValueError(
                f"Free memory on device ({free / GIB:.2f}/{total / GIB:.2f} GiB) on startup is "
                f"less than desired GPU memory utilization ({utilization}, {need / GIB:.2f} GiB)"
            )
        fake.init_distributed()
        hf_model, tokenizer = load_model(model)
        dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(kwargs.get("dtype"))
        hf_model = hf_model.to(dtype or torch.float32).eval()
        weights = sum(p.numel() * p.element_size() for p in hf_model.parameters())
        runner = _ModelRunner(
            hf_model, tokenizer, memory.allocate(weights), memory.allocate(need - weights)
        )
        self.llm_engine = _LLMEngine(_InprocClient(_EngineCore(_Executor(runner), fake.calls)))

    def _runner(self) -> _ModelRunner:
        return self.llm_engine.model_executor.driver_worker.model_runner

    def apply_model(self, fn) -> list[Any]:
        return [fn(_LoadsWeights(self._runner(), self.calls))]

    def generate(self, prompts, sampling_params=None, *, use_tqdm: bool = True):
        runner = self._runner()
        params = sampling_params if isinstance(sampling_params, list) else None
        out = []
        for k, request in enumerate(prompts):
            p = params[k] if params is not None else sampling_params
            ids = list(request["prompt_token_ids"])
            self.calls.prompts.append(ids)
            children = [self._sample(runner, ids, p, j) for j in range(p.n)]
            out.append(RequestOutput(ids, children))
        return out

    def _sample(self, runner: _ModelRunner, prompt: list[int], p, child: int) -> Completion:
        generator = None if p.seed is None else torch.Generator().manual_seed(p.seed + child)
        eos, tokens, logprobs = runner.tokenizer.eos_token_id, [], []
        finish, text = "length", ""
        cache, feed = None, prompt
        with torch.inference_mode():
            for _ in range(p.max_tokens):
                out = runner.model(input_ids=torch.tensor([feed]), cache=cache, use_cache=True)
                cache = out.cache
                token, logprob = sample_step(out.logits[0, -1], p, generator, self.logprobs_mode)
                feed = [token]
                tokens.append(token)
                logprobs.append({token: Logprob(logprob)})
                text = runner.tokenizer.decode(tokens, skip_special_tokens=True)
                hit = [text.index(s) + len(s) for s in p.stop if s in text]
                if (token == eos and not p.ignore_eos) or hit:
                    finish = "stop"
                    text = text[: min(hit)] if hit else text
                    break
        return Completion(child, text, tokens, None, logprobs, finish)


class FakeVLLM(types.ModuleType):
    """Stands in for the `vllm` package; `calls` holds what it was asked, `cuda` its memory."""

    def __init__(self, version: str = "0.19.1", memory: FakeCudaMemory | None = None) -> None:
        super().__init__("vllm")
        self.__version__ = version
        self.calls, self.cuda = Calls(), memory or FakeCudaMemory()
        calls = self.calls
        self.LLM = lambda model, **kwargs: FakeLLM(self, model, **kwargs)

        def sampling_params(**kwargs: Any) -> FakeSamplingParams:
            params = FakeSamplingParams(**kwargs)
            calls.sampling.append(params)
            return params

        self.SamplingParams = sampling_params
        self.TokensPrompt = dict
        self.parallel_state = _parallel_state(self)
        self.distributed = types.ModuleType("vllm.distributed")
        self.distributed.parallel_state = self.parallel_state

    def init_distributed(self) -> None:
        """The world and model-parallel groups, made once per process (as vLLM does)."""
        state = self.parallel_state
        if state._WORLD is None:
            state._WORLD = types.SimpleNamespace(buffers=self.cuda.allocate(WORLD_GROUP_BYTES))
        if state._TP is None:
            state._TP = state._PP = types.SimpleNamespace(world_size=1)

    def install(self, monkeypatch) -> FakeVLLM:
        """This fake as `vllm` for one test: its modules in `sys.modules`, CUDA reported
        present, and torch.cuda's memory calls answered from `cuda`."""
        for name, module in (
            ("vllm", self),
            ("vllm.distributed", self.distributed),
            ("vllm.distributed.parallel_state", self.parallel_state),
        ):
            monkeypatch.setitem(sys.modules, name, module)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        for name in ("empty_cache", "memory_allocated", "memory_reserved", "mem_get_info"):
            monkeypatch.setattr(torch.cuda, name, getattr(self.cuda, name))
        return self


def _parallel_state(fake: FakeVLLM) -> types.ModuleType:
    """`vllm.distributed.parallel_state`: the groups and the three functions that end them."""
    state = types.ModuleType("vllm.distributed.parallel_state")
    state._WORLD = state._TP = state._PP = None

    def destroy_model_parallel() -> None:
        state._TP = state._PP = None

    def destroy_distributed_environment() -> None:
        state._WORLD = None

    def cleanup_dist_env_and_memory(shutdown_ray: bool = False) -> None:
        destroy_model_parallel()
        destroy_distributed_environment()
        gc.collect()
        fake.cuda.empty_cache()

    state.destroy_model_parallel = destroy_model_parallel
    state.destroy_distributed_environment = destroy_distributed_environment
    state.cleanup_dist_env_and_memory = cleanup_dist_env_and_memory
    return state
